// CudaExec: the Exec of layer_math.h on a CUDA device. Every step is enqueued
// on the context's stream: GEMMs through cuda::Gemm (cuBLAS), each ForEach as
// one launch of ForEachKernel (a grid-stride loop calling the op once per
// element), the sums as the block-reduction kernels of cuda_kernels.h, Copy2D
// and Zero as cudaMemcpy2DAsync and cudaMemsetAsync. Each returns the launch
// or call error as an absl::Status (faults during execution surface at the
// backend's next synchronization). When the context has an OpTimer, each
// step is bracketed by its events, labelled with the step's kind and sizes
// (e.g. "gemm 128x24x76032 NN", "Im2ColOp 1824768").
//
// Internal to the plugin; included only by .cu files (nvcc).
//
// Thread-safety: as its Context (one thread at a time).
#ifndef ASGD_MODEL_CUDA_CUDA_EXEC_CUH_
#define ASGD_MODEL_CUDA_CUDA_EXEC_CUH_

#include <cuda_runtime.h>
#include <cxxabi.h>

#include <cstdint>
#include <cstdlib>
#include <string>
#include <typeinfo>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "model/cuda/cuda_device.cuh"
#include "model/cuda/cuda_kernels.h"
#include "model/cuda/cuda_util.h"
#include "model/cuda/op_timer.h"

namespace asgd {
namespace cuda {

// op(e) for e in [0, count), one element per thread and iteration.
template <class Op>
__global__ void ForEachKernel(int64_t count, Op op) {
  for (int64_t e = cuda_kernels::GlobalThread(); e < count;
       e += cuda_kernels::GridThreads()) {
    op(e);
  }
}

// The name of an element-wise op's type without its namespaces, e.g.
// "Im2ColOp" (for OpTimer labels).
template <class Op>
std::string OpTypeName() {
  const char* mangled = typeid(Op).name();
  int status = 0;
  char* demangled = abi::__cxa_demangle(mangled, nullptr, nullptr, &status);
  std::string name = status == 0 && demangled != nullptr ? demangled : mangled;
  std::free(demangled);
  const size_t colon = name.rfind("::");
  return colon == std::string::npos ? name : name.substr(colon + 2);
}

class CudaExec {
 public:
  explicit CudaExec(const Context& ctx) : ctx_(ctx) {}

  absl::Status Gemm(bool trans_a, bool trans_b, int m, int n, int k,
                    const float* a, int lda, const float* b, int ldb,
                    float beta, float* c, int ldc) {
    return Timed(
        [&] {
          return absl::StrCat("gemm ", m, "x", n, "x", k, " ",
                              trans_a ? "T" : "N", trans_b ? "T" : "N");
        },
        [&] {
          return cuda::Gemm(ctx_, trans_a, trans_b, m, n, k, a, lda, b, ldb,
                            beta, c, ldc);
        });
  }

  absl::Status GemmStridedBatched(bool trans_a, bool trans_b, int m, int n,
                                  int k, const float* a, int lda,
                                  int64_t stride_a, const float* b, int ldb,
                                  int64_t stride_b, float beta, float* c,
                                  int ldc, int64_t stride_c, int batch) {
    return Timed(
        [&] {
          return absl::StrCat("gemm ", batch, " x ", m, "x", n, "x", k, " ",
                              trans_a ? "T" : "N", trans_b ? "T" : "N");
        },
        [&] {
          return cuda::GemmStridedBatched(ctx_, trans_a, trans_b, m, n, k, a,
                                          lda, stride_a, b, ldb, stride_b,
                                          beta, c, ldc, stride_c, batch);
        });
  }

  template <class Op>
  absl::Status ForEach(int64_t count, const Op& op) {
    if (count <= 0) return absl::OkStatus();
    return Timed([&] { return absl::StrCat(OpTypeName<Op>(), " ", count); },
                 [&]() -> absl::Status {
                   ForEachKernel<Op><<<cuda_kernels::ElementwiseGrid(count),
                                       cuda_kernels::kElementwiseBlock, 0,
                                       ctx_.stream>>>(count, op);
                   ASGD_CUDA_RETURN_IF_ERROR(cudaGetLastError());
                   return absl::OkStatus();
                 });
  }

  absl::Status ColumnSums(const float* m, int rows, int cols, float* sums) {
    return Timed(
        [&] { return absl::StrCat("column sums ", rows, "x", cols); },
        [&]() -> absl::Status {
          ASGD_CUDA_RETURN_IF_ERROR(cuda_kernels::LaunchColumnSums(
              m, rows, cols, sums, ctx_.stream));
          return absl::OkStatus();
        });
  }

  absl::Status ChannelSums(const float* m, int rows, int groups, int group,
                           float* sums) {
    return Timed(
        [&] {
          return absl::StrCat("channel sums ", rows, "x", groups, "x", group);
        },
        [&]() -> absl::Status {
          ASGD_CUDA_RETURN_IF_ERROR(cuda_kernels::LaunchChannelSums(
              m, rows, groups, group, sums, ctx_.stream));
          return absl::OkStatus();
        });
  }

  absl::Status Copy2D(float* dst, int64_t dst_stride, const float* src,
                      int64_t src_stride, int64_t width, int64_t rows) {
    if (width <= 0 || rows <= 0) return absl::OkStatus();
    return Timed(
        [&] { return absl::StrCat("copy ", rows, "x", width); },
        [&]() -> absl::Status {
          ASGD_CUDA_RETURN_IF_ERROR(cudaMemcpy2DAsync(
              dst, sizeof(float) * dst_stride, src, sizeof(float) * src_stride,
              sizeof(float) * width, rows, cudaMemcpyDeviceToDevice,
              ctx_.stream));
          return absl::OkStatus();
        });
  }

  absl::Status Zero(float* p, int64_t count) {
    if (count <= 0) return absl::OkStatus();
    return Timed([&] { return absl::StrCat("zero ", count); },
                 [&]() -> absl::Status {
                   ASGD_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(
                       p, 0, sizeof(float) * count, ctx_.stream));
                   return absl::OkStatus();
                 });
  }

 private:
  // step(), bracketed by the context's timer events under label() when it
  // has a timer (the label is made only then).
  template <class Label, class Step>
  absl::Status Timed(const Label& label, const Step& step) {
    if (ctx_.timer == nullptr) return step();
    ASGD_RETURN_IF_ERROR(ctx_.timer->Begin(ctx_.stream));
    ASGD_RETURN_IF_ERROR(step());
    return ctx_.timer->End(ctx_.stream, label());
  }

  const Context ctx_;
};

}  // namespace cuda
}  // namespace asgd

#endif  // ASGD_MODEL_CUDA_CUDA_EXEC_CUH_
