// HostExec: the Exec of layer_math.h on the CPU (OpenBLAS GEMMs and plain
// loops), so that the CUDA layers' steps (dense_impl.h, conv_impl.h,
// lstm_impl.h) run, and are checked against model/layers/, on machines
// without a GPU (layer_impl_test.cc). Gemm makes the same column-major call
// (AsColumnMajor) that cuda::Gemm makes to cuBLAS, so those tests check that
// translation for every GEMM the layers run, too.
//
// ForEach visits the elements in the order asked for: forward, or backward
// (the last element first), so that a test that runs both catches an op that
// reads what another element of the same pass writes (which on a GPU would
// be a race).
//
// Thread-safety: stateless apart from the order; one thread at a time.
#ifndef ASGD_MODEL_CUDA_HOST_EXEC_H_
#define ASGD_MODEL_CUDA_HOST_EXEC_H_

#include <cstdint>

#include "absl/status/status.h"

namespace asgd {
namespace cuda_ops {

class HostExec {
 public:
  enum class Order { kForward, kBackward };
  explicit HostExec(Order order = Order::kForward) : order_(order) {}

  absl::Status Gemm(bool trans_a, bool trans_b, int m, int n, int k,
                    const float* a, int lda, const float* b, int ldb,
                    float beta, float* c, int ldc);
  // The batch's GEMMs one after the other, each the column-major call that
  // cuda::GemmStridedBatched makes (AsColumnMajorBatch).
  absl::Status GemmStridedBatched(bool trans_a, bool trans_b, int m, int n,
                                  int k, const float* a, int lda,
                                  int64_t stride_a, const float* b, int ldb,
                                  int64_t stride_b, float beta, float* c,
                                  int ldc, int64_t stride_c, int batch);

  template <class Op>
  absl::Status ForEach(int64_t count, const Op& op) {
    if (order_ == Order::kForward) {
      for (int64_t e = 0; e < count; ++e) op(e);
    } else {
      for (int64_t e = count - 1; e >= 0; --e) op(e);
    }
    return absl::OkStatus();
  }

  absl::Status ColumnSums(const float* m, int rows, int cols, float* sums);
  absl::Status ChannelSums(const float* m, int rows, int groups, int group,
                           float* sums);
  absl::Status Copy2D(float* dst, int64_t dst_stride, const float* src,
                      int64_t src_stride, int64_t width, int64_t rows);
  absl::Status Zero(float* p, int64_t count);

 private:
  const Order order_;
};

}  // namespace cuda_ops
}  // namespace asgd

#endif  // ASGD_MODEL_CUDA_HOST_EXEC_H_
