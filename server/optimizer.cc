#include "server/optimizer.h"

#include <cmath>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace asgd {

absl::StatusOr<Optimizer> Optimizer::Create(const OptimizerOptions& options) {
  if (!(options.learning_rate > 0.0f) || !std::isfinite(options.learning_rate)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "learning rate must be positive and finite, got ",
        options.learning_rate));
  }
  if (!(options.momentum >= 0.0f && options.momentum < 1.0f)) {
    return absl::InvalidArgumentError(
        absl::StrCat("momentum must be in [0, 1), got ", options.momentum));
  }
  return Optimizer(options);
}

void Optimizer::Apply(float* __restrict w, float* __restrict v,
                      const float* __restrict g, int64_t n,
                      float scale) const {
  const float lr = options_.learning_rate * scale;
  if (!has_state()) {
    for (int64_t i = 0; i < n; ++i) w[i] -= lr * g[i];
    return;
  }
  const float mu = options_.momentum;
  for (int64_t i = 0; i < n; ++i) {
    const float vi = mu * v[i] + g[i];
    v[i] = vi;
    w[i] -= lr * vi;
  }
}

}  // namespace asgd
