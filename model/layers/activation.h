// Element-wise activations of dense and conv layers, and their derivatives
// expressed through the activation's output y (all four can be: relu'
// = [y > 0], sigmoid' = y(1 - y), tanh' = 1 - y², none' = 1).
//
// Thread-safety: pure functions.
#ifndef ASGD_MODEL_LAYERS_ACTIVATION_H_
#define ASGD_MODEL_LAYERS_ACTIVATION_H_

#include <cstdint>

#include "model/model_spec.h"

namespace asgd {

// y[j] = act(y[j]) for j in [0, n).
void ActivateInPlace(Activation act, float* y, int64_t n);

// d[j] *= act'(x) given y[j] = act(x), for j in [0, n).
void ActivationBackwardInPlace(Activation act, const float* y, float* d,
                               int64_t n);

}  // namespace asgd

#endif  // ASGD_MODEL_LAYERS_ACTIVATION_H_
