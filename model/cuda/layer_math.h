// The device-independent core of the CUDA layers: element-wise math written
// once for the device (nvcc compiles it as __host__ __device__) and the host
// (g++ compiles it as plain C++), and the Exec interface through which the
// layer algorithms (dense_impl.h, conv_impl.h, lstm_impl.h) run their steps.
//
// Why: the CUDA backend's layers are an ordered list of GEMMs and
// element-wise passes. Written as templates over an Exec, the same list runs
// on a GPU (CudaExec, cuda_exec.cuh: cuBLAS and one grid-stride kernel per
// pass) and on the CPU (HostExec, host_exec.h: OpenBLAS and loops), so that
// layer_impl_test.cc checks every index and every GEMM argument of the CUDA
// layers against the CPU layers of model/layers/ on any machine, with or
// without a GPU. What only a GPU can check is then the thin CUDA part:
// cuBLAS itself (the column-major call it gets, AsColumnMajor below, is
// checked on the CPU too), the kernel launches, the block reductions
// (cuda_kernels.cu) and the streams.
//
// An Exec provides, executed in call order (CudaExec enqueues them on one
// stream; HostExec runs them at once), all pointers in its memory:
//
//   // C [m, n] = op(A) op(B) + beta C, row-major, exactly as
//   // cblas_sgemm(CblasRowMajor, ta, tb, m, n, k, 1, a, lda, b, ldb, beta,
//   //             c, ldc).
//   absl::Status Gemm(bool trans_a, bool trans_b, int m, int n, int k,
//                     const float* a, int lda, const float* b, int ldb,
//                     float beta, float* c, int ldc);
//   // For j in [0, batch): the Gemm above on a + j * stride_a,
//   // b + j * stride_b and c + j * stride_c (matrices that do not overlap
//   // C's), in any order and concurrently.
//   absl::Status GemmStridedBatched(bool trans_a, bool trans_b, int m, int n,
//                                   int k, const float* a, int lda,
//                                   int64_t stride_a, const float* b, int ldb,
//                                   int64_t stride_b, float beta, float* c,
//                                   int ldc, int64_t stride_c, int batch);
//   // op(e) for every e in [0, count), in any order and concurrently: an op
//   // must write only elements that no other e of the same pass reads or
//   // writes (each op below states which elements e owns).
//   template <class Op> absl::Status ForEach(int64_t count, const Op& op);
//   // sums[j] = sum_i m[i * cols + j].
//   absl::Status ColumnSums(const float* m, int rows, int cols, float* sums);
//   // sums[k] = sum_i sum_q m[i * groups * group + k * group + q].
//   absl::Status ChannelSums(const float* m, int rows, int groups, int group,
//                            float* sums);
//   // dst[r * dst_stride + j] = src[r * src_stride + j], j < width, r < rows.
//   absl::Status Copy2D(float* dst, int64_t dst_stride, const float* src,
//                       int64_t src_stride, int64_t width, int64_t rows);
//   // p[0, count) = 0.
//   absl::Status Zero(float* p, int64_t count);
//
// Thread-safety: pure functions and plain value types.
#ifndef ASGD_MODEL_CUDA_LAYER_MATH_H_
#define ASGD_MODEL_CUDA_LAYER_MATH_H_

#include <math.h>

#include <cstdint>

#include "model/model_spec.h"

#if defined(__CUDACC__)
#define ASGD_HD __host__ __device__
#else
#define ASGD_HD
#endif

namespace asgd {
namespace cuda_ops {

// One float operation rounded on its own: on the device __fmul_rn,
// __fadd_rn, __fsub_rn, which nvcc never contracts into a fused
// multiply-add; on the host plain operations, so a host build that must
// agree bit for bit is compiled without contraction (-ffp-contract=off).
ASGD_HD inline float MulRn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}
ASGD_HD inline float AddRn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fadd_rn(a, b);
#else
  return a + b;
#endif
}
ASGD_HD inline float SubRn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fsub_rn(a, b);
#else
  return a - b;
#endif
}

enum class Act : int { kIdentity = 0, kRelu = 1, kSigmoid = 2, kTanh = 3 };

// A row-major GEMM, C [m, n] = op(A) op(B) + beta C with leading dimensions
// lda, ldb, ldc (cblas_sgemm(CblasRowMajor, ...)), as the column-major GEMM
// that a column-major BLAS (cuBLAS) runs on the same memory: a row-major X
// read column-major with the same leading dimension is X^T, so row-major C
// is column-major C^T = op(B)^T op(A)^T, i.e. the column-major product of
// `first` = B (with B's own transpose flag) and `second` = A (with A's),
// with m and n exchanged; C and ldc stay as they are. cuda::Gemm calls
// cuBLAS with these; layer_impl_test checks them with a column-major
// OpenBLAS call.
struct ColumnMajorGemm {
  bool trans_first, trans_second;
  int m, n, k;
  const float* first;
  int ld_first;
  const float* second;
  int ld_second;
};
inline ColumnMajorGemm AsColumnMajor(bool trans_a, bool trans_b, int m, int n,
                                     int k, const float* a, int lda,
                                     const float* b, int ldb) {
  return {trans_b, trans_a, n, m, k, b, ldb, a, lda};
}

// The same for a strided batch: the column-major call's own strides, B's
// for `first` and A's for `second` (C's stays as it is).
struct ColumnMajorBatch {
  ColumnMajorGemm gemm;
  int64_t stride_first, stride_second;
};
inline ColumnMajorBatch AsColumnMajorBatch(bool trans_a, bool trans_b, int m,
                                           int n, int k, const float* a,
                                           int lda, int64_t stride_a,
                                           const float* b, int ldb,
                                           int64_t stride_b) {
  return {AsColumnMajor(trans_a, trans_b, m, n, k, a, lda, b, ldb), stride_b,
          stride_a};
}

// The element-wise code of a model activation.
inline Act ActOf(Activation activation) {
  switch (activation) {
    case Activation::kRelu:
      return Act::kRelu;
    case Activation::kSigmoid:
      return Act::kSigmoid;
    case Activation::kTanh:
      return Act::kTanh;
    case Activation::kNone:
      break;
  }
  return Act::kIdentity;
}

ASGD_HD inline float SigmoidF(float x) { return 1.0f / (1.0f + expf(-x)); }

// act(v), as model/layers/activation.cc: ReLU as std::max(v, 0.0f), so NaN
// stays NaN.
ASGD_HD inline float Activate(float v, Act act) {
  if (act == Act::kRelu) return v < 0.0f ? 0.0f : v;
  if (act == Act::kSigmoid) return SigmoidF(v);
  if (act == Act::kTanh) return tanhf(v);
  return v;
}

// d · act'(x) given y = act(x): relu [y > 0], sigmoid y(1 - y), tanh
// 1 - y², none 1 (model/layers/activation.h).
ASGD_HD inline float ActivationBackward(float d, float y, Act act) {
  if (act == Act::kRelu) return y > 0.0f ? d : 0.0f;
  if (act == Act::kSigmoid) return d * (y * (1.0f - y));
  if (act == Act::kTanh) return d * (1.0f - y * y);
  return d;
}

// z[e] = act(z[e] + bias[e % cols]) over a row-major [rows, cols] matrix;
// count rows * cols; e owns z[e].
struct BiasActivationOp {
  float* z;
  const float* bias;
  int cols;
  Act act;
  ASGD_HD void operator()(int64_t e) const {
    z[e] = Activate(z[e] + bias[e % cols], act);
  }
};

// d[e] = d[e] · act'(x) given y[e] = act(x); e owns d[e].
struct ActivationBackwardOp {
  float* d;
  const float* y;
  Act act;
  ASGD_HD void operator()(int64_t e) const {
    d[e] = ActivationBackward(d[e], y[e], act);
  }
};

}  // namespace cuda_ops
}  // namespace asgd

#endif  // ASGD_MODEL_CUDA_LAYER_MATH_H_
