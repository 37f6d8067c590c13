// Finite-difference check of a backend's whole-model gradient (test
// support): central differences of ComputeGradient's mean loss,
// (L(θ_j + h) − L(θ_j − h)) / 2h, against the analytic gradient on the
// parameters first, first + stride, ... An element passes when
// |analytic − numeric| <= atol + rtol · max(|analytic|, |numeric|).
// (model/layers/gradient_check.h checks one layer's Backward instead.)
//
//   LossGradientReport r = CheckLossGradient(*backend, params, batch, grad);
//   EXPECT_EQ(r.failures, 0) << r.first_failure;
//
// Thread-safety: one call per backend at a time.
#ifndef ASGD_MODEL_LOSS_GRADIENT_CHECK_H_
#define ASGD_MODEL_LOSS_GRADIENT_CHECK_H_

#include <cstddef>
#include <string>
#include <vector>

#include "absl/types/span.h"
#include "model/backend.h"

namespace asgd {

struct LossGradientOptions {
  double step = 1e-2;  // h
  double atol = 2e-3;
  double rtol = 2e-2;
  size_t first = 0;   // the first parameter checked
  size_t stride = 1;  // then every stride-th
};

struct LossGradientReport {
  int checked = 0;
  int failures = 0;
  std::string first_failure;  // "param 17: analytic ..., numeric ..."
};

// `grad` is the backend's gradient of `batch` at `params`. A failed
// ComputeGradient counts as a failure of that parameter.
LossGradientReport CheckLossGradient(ModelBackend& backend,
                                     std::vector<float> params,
                                     const Batch& batch,
                                     absl::Span<const float> grad,
                                     const LossGradientOptions& options = {});

}  // namespace asgd

#endif  // ASGD_MODEL_LOSS_GRADIENT_CHECK_H_
