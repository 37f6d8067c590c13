#include "model/layers/activation.h"

#include <algorithm>
#include <cmath>

namespace asgd {

void ActivateInPlace(Activation act, float* y, int64_t n) {
  switch (act) {
    case Activation::kNone:
      return;
    case Activation::kRelu:
      for (int64_t j = 0; j < n; ++j) y[j] = std::max(y[j], 0.0f);
      return;
    case Activation::kSigmoid:
      for (int64_t j = 0; j < n; ++j) y[j] = 1.0f / (1.0f + std::exp(-y[j]));
      return;
    case Activation::kTanh:
      for (int64_t j = 0; j < n; ++j) y[j] = std::tanh(y[j]);
      return;
  }
}

void ActivationBackwardInPlace(Activation act, const float* y, float* d,
                               int64_t n) {
  switch (act) {
    case Activation::kNone:
      return;
    case Activation::kRelu:
      for (int64_t j = 0; j < n; ++j) d[j] = y[j] > 0.0f ? d[j] : 0.0f;
      return;
    case Activation::kSigmoid:
      for (int64_t j = 0; j < n; ++j) d[j] *= y[j] * (1.0f - y[j]);
      return;
    case Activation::kTanh:
      for (int64_t j = 0; j < n; ++j) d[j] *= 1.0f - y[j] * y[j];
      return;
  }
}

}  // namespace asgd
