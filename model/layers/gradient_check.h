// Finite-difference checks of a Layer's Backward (test support).
//
// The scalar checked is S = Σ out ⊙ R for a fixed random R, so dS/dout = R.
// The analytic gradients (Backward with dout = R) are compared with central
// differences (S(θ + h) − S(θ − h)) / 2h, evaluated in float through
// Forward, on a sample of parameters and inputs. An element passes when
// |analytic − numeric| <= atol + rtol · max(|analytic|, |numeric|).
//
//   GradientCheckOptions o;  // defaults suit float layers of moderate size
//   GradientCheckReport r = CheckLayerGradients(spec, /*layer=*/0, 3, 4, o);
//   EXPECT_EQ(r.failures, 0) << r.first_failure;
//
// Thread-safety: reentrant.
#ifndef ASGD_MODEL_LAYERS_GRADIENT_CHECK_H_
#define ASGD_MODEL_LAYERS_GRADIENT_CHECK_H_

#include <cstdint>
#include <string>

#include "model/model_spec.h"

namespace asgd {

struct GradientCheckOptions {
  double step = 1e-2;   // h
  double atol = 2e-3;
  double rtol = 2e-2;
  int max_params = 400;  // parameters sampled (all if fewer)
  int max_inputs = 200;  // input values sampled (all if fewer)
  uint64_t seed = 7;
  // Inputs uniform in ±input_scale; parameters from InitialParams, plus
  // uniform noise of ±param_noise (so biases are not all zero).
  double input_scale = 1.0;
  double param_noise = 0.1;
};

struct GradientCheckReport {
  int checked = 0;
  int failures = 0;
  double max_abs_error = 0;
  std::string first_failure;  // "param 17 (w_x[...]): analytic ... numeric ..."
};

// Checks hidden layer `layer` of `spec` (layers.size(): the output layer's
// affine part) on a batch of `sequences` × `steps` rows.
GradientCheckReport CheckLayerGradients(const ModelSpec& spec, int layer,
                                        int sequences, int steps,
                                        const GradientCheckOptions& options);

}  // namespace asgd

#endif  // ASGD_MODEL_LAYERS_GRADIENT_CHECK_H_
