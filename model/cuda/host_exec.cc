#include "model/cuda/host_exec.h"

#include <cblas.h>

#include <algorithm>

#include "model/cuda/layer_math.h"

namespace asgd {
namespace cuda_ops {

absl::Status HostExec::Gemm(bool trans_a, bool trans_b, int m, int n, int k,
                            const float* a, int lda, const float* b, int ldb,
                            float beta, float* c, int ldc) {
  if (m == 0 || n == 0) return absl::OkStatus();
  // The column-major call cuda::Gemm makes to cuBLAS, here to OpenBLAS.
  const ColumnMajorGemm g =
      AsColumnMajor(trans_a, trans_b, m, n, k, a, lda, b, ldb);
  cblas_sgemm(CblasColMajor, g.trans_first ? CblasTrans : CblasNoTrans,
              g.trans_second ? CblasTrans : CblasNoTrans, g.m, g.n, g.k, 1.0f,
              g.first, g.ld_first, g.second, g.ld_second, beta, c, ldc);
  return absl::OkStatus();
}

absl::Status HostExec::GemmStridedBatched(bool trans_a, bool trans_b, int m,
                                          int n, int k, const float* a, int lda,
                                          int64_t stride_a, const float* b,
                                          int ldb, int64_t stride_b, float beta,
                                          float* c, int ldc, int64_t stride_c,
                                          int batch) {
  if (m == 0 || n == 0) return absl::OkStatus();
  // The column-major call cuda::GemmStridedBatched makes to cuBLAS, one
  // matrix at a time.
  const ColumnMajorBatch cb = AsColumnMajorBatch(
      trans_a, trans_b, m, n, k, a, lda, stride_a, b, ldb, stride_b);
  const ColumnMajorGemm& g = cb.gemm;
  for (int j = 0; j < batch; ++j) {
    cblas_sgemm(CblasColMajor, g.trans_first ? CblasTrans : CblasNoTrans,
                g.trans_second ? CblasTrans : CblasNoTrans, g.m, g.n, g.k, 1.0f,
                g.first + j * cb.stride_first, g.ld_first,
                g.second + j * cb.stride_second, g.ld_second, beta,
                c + j * stride_c, ldc);
  }
  return absl::OkStatus();
}

absl::Status HostExec::ColumnSums(const float* m, int rows, int cols,
                                  float* sums) {
  for (int j = 0; j < cols; ++j) {
    float s = 0.0f;
    for (int i = 0; i < rows; ++i) s += m[int64_t{i} * cols + j];
    sums[j] = s;
  }
  return absl::OkStatus();
}

absl::Status HostExec::ChannelSums(const float* m, int rows, int groups,
                                   int group, float* sums) {
  for (int k = 0; k < groups; ++k) {
    float s = 0.0f;
    for (int i = 0; i < rows; ++i) {
      const float* g = m + (int64_t{i} * groups + k) * group;
      for (int q = 0; q < group; ++q) s += g[q];
    }
    sums[k] = s;
  }
  return absl::OkStatus();
}

absl::Status HostExec::Copy2D(float* dst, int64_t dst_stride, const float* src,
                              int64_t src_stride, int64_t width, int64_t rows) {
  for (int64_t r = 0; r < rows; ++r) {
    std::copy(src + r * src_stride, src + r * src_stride + width,
              dst + r * dst_stride);
  }
  return absl::OkStatus();
}

absl::Status HostExec::Zero(float* p, int64_t count) {
  std::fill(p, p + count, 0.0f);
  return absl::OkStatus();
}

}  // namespace cuda_ops
}  // namespace asgd
