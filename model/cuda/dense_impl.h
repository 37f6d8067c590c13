// The dense layer's steps for the CUDA backend, on any Exec (layer_math.h),
// mirroring model/layers/dense.cc: y = act(x W^T + b) per row with W
// [units, in] and b [units]; also the output layer's affine part
// (activation none). Pointers are the Exec's memory; `dout` is overwritten
// (see cuda_layer.h).
//
//   Forward:  one GEMM out = in W^T, then BiasActivationOp.
//   Backward: dZ = dout · act'(out) in place (ActivationBackwardOp),
//             dW = dZ^T X (GEMM), db = column sums of dZ, din = dZ W (GEMM).
//
// Thread-safety: pure functions.
#ifndef ASGD_MODEL_CUDA_DENSE_IMPL_H_
#define ASGD_MODEL_CUDA_DENSE_IMPL_H_

#include <cstdint>

#include "absl/status/status.h"
#include "common/status_macros.h"
#include "model/cuda/layer_math.h"

namespace asgd {
namespace cuda_ops {

struct DenseShape {
  int in_dim = 0;
  int units = 0;
  Act act = Act::kIdentity;
};

// The CPU copies the bias into out and runs sgemm(N, T, n, units, in, in,
// in_dim, w, in_dim, 1, out, units), then activates; here the GEMM writes
// out (beta 0) and one pass adds the bias and activates.
template <class Exec>
absl::Status DenseForward(Exec& x, const DenseShape& s, const float* params,
                          const float* in, int n, float* out) {
  const float* w = params;
  const float* b = params + int64_t{s.units} * s.in_dim;
  ASGD_RETURN_IF_ERROR(x.Gemm(false, true, n, s.units, s.in_dim, in, s.in_dim,
                              w, s.in_dim, 0.0f, out, s.units));
  return x.ForEach(int64_t{n} * s.units,
                   BiasActivationOp{out, b, s.units, s.act});
}

template <class Exec>
absl::Status DenseBackward(Exec& x, const DenseShape& s, const float* params,
                           const float* in, const float* out, float* dout,
                           int n, float* dparams, float* din) {
  // dZ = dout · act'(out), in place (the CPU copies dout to its dz_ first).
  float* dz = dout;
  if (s.act != Act::kIdentity) {
    ASGD_RETURN_IF_ERROR(
        x.ForEach(int64_t{n} * s.units, ActivationBackwardOp{dz, out, s.act}));
  }
  // dW = dZ^T X [units, in]: sgemm(T, N, units, in, n, dz, units, in, in_dim,
  // 0, dparams, in_dim).
  ASGD_RETURN_IF_ERROR(x.Gemm(true, false, s.units, s.in_dim, n, dz, s.units,
                              in, s.in_dim, 0.0f, dparams, s.in_dim));
  // db = column sums of dZ.
  ASGD_RETURN_IF_ERROR(
      x.ColumnSums(dz, n, s.units, dparams + int64_t{s.units} * s.in_dim));
  if (din != nullptr) {
    // dX = dZ W [n, in]: sgemm(N, N, n, in, units, dz, units, w, in_dim, 0,
    // din, in_dim).
    ASGD_RETURN_IF_ERROR(x.Gemm(false, false, n, s.in_dim, s.units, dz, s.units,
                                params, s.in_dim, 0.0f, din, s.in_dim));
  }
  return absl::OkStatus();
}

}  // namespace cuda_ops
}  // namespace asgd

#endif  // ASGD_MODEL_CUDA_DENSE_IMPL_H_
