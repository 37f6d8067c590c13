#include "model/layers/dense.h"

#include <cblas.h>

#include <algorithm>

#include "model/layers/activation.h"

namespace asgd {

DenseLayer::DenseLayer(int in_dim, int units, Activation activation,
                       int max_rows)
    : in_dim_(in_dim),
      units_(units),
      activation_(activation),
      dz_(int64_t{max_rows} * units) {}

void DenseLayer::Forward(const float* params, const float* in, int sequences,
                         int steps, float* out) {
  const int n = sequences * steps;
  const float* w = params;
  const float* b = params + int64_t{units_} * in_dim_;
  for (int i = 0; i < n; ++i) std::copy(b, b + units_, out + int64_t{i} * units_);
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, units_, in_dim_,
              1.0f, in, in_dim_, w, in_dim_, 1.0f, out, units_);
  ActivateInPlace(activation_, out, int64_t{n} * units_);
}

void DenseLayer::Backward(const float* params, const float* in,
                          const float* out, const float* dout, int sequences,
                          int steps, float* dparams, float* din) {
  const int n = sequences * steps;
  const int64_t m = int64_t{n} * units_;
  float* dz = dz_.data();
  std::copy(dout, dout + m, dz);
  ActivationBackwardInPlace(activation_, out, dz, m);
  // dW = dZ^T X  [units, in];  db = column sums of dZ.
  cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, units_, in_dim_, n,
              1.0f, dz, units_, in, in_dim_, 0.0f, dparams, in_dim_);
  float* db = dparams + int64_t{units_} * in_dim_;
  std::fill(db, db + units_, 0.0f);
  for (int i = 0; i < n; ++i) {
    const float* row = dz + int64_t{i} * units_;
    for (int k = 0; k < units_; ++k) db[k] += row[k];
  }
  if (din != nullptr) {
    // dX = dZ W  [n, in].
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, in_dim_, units_,
                1.0f, dz, units_, params, in_dim_, 0.0f, din, in_dim_);
  }
}

}  // namespace asgd
