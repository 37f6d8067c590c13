#include "server/optimizer.h"

#include <cmath>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace asgd {

absl::StatusOr<LrSchedule> ParseLrSchedule(absl::string_view text) {
  if (text == "constant") return LrSchedule::kConstant;
  if (text == "step") return LrSchedule::kStep;
  if (text == "exponential") return LrSchedule::kExponential;
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown learning-rate schedule '", text,
      "' (want constant, step or exponential)"));
}

absl::StatusOr<Optimizer> Optimizer::Create(const OptimizerOptions& o) {
  if (!(o.learning_rate > 0.0f) || !std::isfinite(o.learning_rate)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "learning rate must be positive and finite, got ", o.learning_rate));
  }
  if (!(o.momentum >= 0.0f && o.momentum < 1.0f)) {
    return absl::InvalidArgumentError(
        absl::StrCat("momentum must be in [0, 1), got ", o.momentum));
  }
  if (o.nesterov && o.momentum == 0.0f) {
    return absl::InvalidArgumentError("Nesterov momentum needs momentum > 0");
  }
  if (!(o.weight_decay >= 0.0f) || !(o.dc_lambda >= 0.0f)) {
    return absl::InvalidArgumentError(
        "weight decay and the DC-ASGD lambda must be >= 0");
  }
  if (o.schedule != LrSchedule::kConstant &&
      (o.step_size < 1 || !(o.gamma > 0.0f && o.gamma <= 1.0f))) {
    return absl::InvalidArgumentError(absl::StrCat(
        "a learning-rate schedule needs step_size >= 1 and gamma in (0, 1], "
        "got ", o.step_size, " and ", o.gamma));
  }
  return Optimizer(o);
}

float Optimizer::LearningRate(uint64_t step) const {
  const OptimizerOptions& o = options_;
  switch (o.schedule) {
    case LrSchedule::kConstant:
      return o.learning_rate;
    case LrSchedule::kStep:
      return o.learning_rate *
             std::pow(o.gamma, static_cast<float>(step / o.step_size));
    case LrSchedule::kExponential:
      return o.learning_rate *
             std::pow(o.gamma, static_cast<float>(step) / o.step_size);
  }
  return o.learning_rate;
}

void Optimizer::Apply(float* __restrict w, float* __restrict v,
                      const float* __restrict g_in, int64_t n,
                      const UpdateContext& ctx) const {
  const float lr = LearningRate(ctx.step) * ctx.scale;
  const float mu = options_.momentum;
  const float wd = options_.weight_decay;
  const float lambda = ctx.backup != nullptr ? options_.dc_lambda : 0.0f;
  const float* __restrict backup = ctx.backup;
  // The common cases get their own loops so they vectorize cleanly.
  if (lambda == 0.0f && wd == 0.0f) {
    if (mu == 0.0f) {
      for (int64_t i = 0; i < n; ++i) w[i] -= lr * g_in[i];
    } else if (!options_.nesterov) {
      for (int64_t i = 0; i < n; ++i) {
        const float vi = mu * v[i] + g_in[i];
        v[i] = vi;
        w[i] -= lr * vi;
      }
    } else {
      for (int64_t i = 0; i < n; ++i) {
        const float vi = mu * v[i] + g_in[i];
        v[i] = vi;
        w[i] -= lr * (g_in[i] + mu * vi);
      }
    }
    return;
  }
  for (int64_t i = 0; i < n; ++i) {
    float g = g_in[i];
    if (lambda != 0.0f) g += lambda * g * g * (w[i] - backup[i]);
    g += wd * w[i];
    if (mu == 0.0f) {
      w[i] -= lr * g;
    } else {
      const float vi = mu * v[i] + g;
      v[i] = vi;
      w[i] -= lr * (options_.nesterov ? g + mu * vi : vi);
    }
  }
}

}  // namespace asgd
