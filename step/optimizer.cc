#include "step/optimizer.h"

// The exact-replay invariant (step/optimizer.h): the step's float arithmetic
// must not be compiled with fast-math.
#if defined(__FAST_MATH__)
#error "-ffast-math breaks exact replay (see step/optimizer.h)"
#endif

#include <algorithm>
#include <cmath>
#include <cstring>

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

namespace {

// |x| as bits: for non-negative floats the bit patterns order like the
// values, so the running maximum is an integer max, which vectorizes (a
// float max reduction does not without -ffast-math).
inline uint32_t AbsBits(float x) {
  uint32_t u;
  std::memcpy(&u, &x, sizeof(u));
  return u & 0x7fffffffu;
}

inline float FromBits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof(f));
  return f;
}

}  // namespace

ApplyStats Optimizer::Apply(float* __restrict w, float* __restrict v,
                            const float* __restrict g_in, int64_t n,
                            const UpdateContext& ctx) const {
  if (ctx.keep != nullptr) {
    // A pruned model: the step of blocks whose gradient is masked.
    constexpr int64_t kBlock = 2048;
    alignas(64) float masked[kBlock];
    ApplyStats stats;
    for (int64_t b = 0; b < n; b += kBlock) {
      const int64_t m = std::min(kBlock, n - b);
      // g, or +0 where pruned, by masking its bits: this loop vectorizes,
      // where a float select compiles to a branch per element that a
      // random mask mispredicts (1-bit replay under a 70% mask: 14x slower).
      const uint8_t* __restrict keep = ctx.keep + b;
      const float* __restrict g = g_in + b;
      for (int64_t i = 0; i < m; ++i) {
        uint32_t bits;
        std::memcpy(&bits, g + i, sizeof(bits));
        bits &= 0u - static_cast<uint32_t>(keep[i] != 0);
        std::memcpy(masked + i, &bits, sizeof(bits));
      }
      UpdateContext c = ctx;
      c.keep = nullptr;
      if (c.backup != nullptr) c.backup += b;
      const ApplyStats s =
          Apply(w + b, v != nullptr ? v + b : nullptr, masked, m, c);
      stats.max_abs_w = std::max(stats.max_abs_w, s.max_abs_w);
      stats.max_abs_v = std::max(stats.max_abs_v, s.max_abs_v);
    }
    return stats;
  }
  const float lr = LearningRate(ctx.step) * ctx.scale;
  const float mu = options_.momentum;
  const float wd = options_.weight_decay;
  const float lambda = ctx.backup != nullptr ? options_.dc_lambda : 0.0f;
  const float* __restrict backup = ctx.backup;
  uint32_t max_w = 0, max_v = 0;
  // The common cases get their own loops so they vectorize cleanly; each
  // also keeps the largest |w| (and |v|) it writes.
  if (lambda == 0.0f && wd == 0.0f) {
    if (mu == 0.0f) {
      for (int64_t i = 0; i < n; ++i) {
        const float wi = w[i] - lr * g_in[i];
        w[i] = wi;
        max_w = std::max(max_w, AbsBits(wi));
      }
    } else if (!options_.nesterov) {
      for (int64_t i = 0; i < n; ++i) {
        const float vi = mu * v[i] + g_in[i];
        v[i] = vi;
        const float wi = w[i] - lr * vi;
        w[i] = wi;
        max_v = std::max(max_v, AbsBits(vi));
        max_w = std::max(max_w, AbsBits(wi));
      }
    } else {
      for (int64_t i = 0; i < n; ++i) {
        const float vi = mu * v[i] + g_in[i];
        v[i] = vi;
        const float wi = w[i] - lr * (g_in[i] + mu * vi);
        w[i] = wi;
        max_v = std::max(max_v, AbsBits(vi));
        max_w = std::max(max_w, AbsBits(wi));
      }
    }
    return {FromBits(max_w), FromBits(max_v)};
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
      max_v = std::max(max_v, AbsBits(vi));
    }
    max_w = std::max(max_w, AbsBits(w[i]));
  }
  return {FromBits(max_w), FromBits(max_v)};
}

bool Optimizer::StaysBounded(const float* w, const float* v, const float* g_in,
                             int64_t n, const UpdateContext& ctx) const {
  // The arithmetic of Apply()'s general loop, which gives the same values as
  // its special cases (the terms it drops there are exact zeros). A value
  // that overflows on the way ends as Inf or NaN, which fails the test too.
  const float lr = LearningRate(ctx.step) * ctx.scale;
  const float mu = options_.momentum;
  const float wd = options_.weight_decay;
  const float lambda = ctx.backup != nullptr ? options_.dc_lambda : 0.0f;
  const float limit = static_cast<float>(kMaxMagnitude);
  for (int64_t i = 0; i < n; ++i) {
    float g = g_in[i];
    if (lambda != 0.0f) g += lambda * g * g * (w[i] - ctx.backup[i]);
    if (wd != 0.0f) g += wd * w[i];
    float wi;
    if (mu == 0.0f) {
      wi = w[i] - lr * g;
    } else {
      const float vi = mu * v[i] + g;
      if (!(std::fabs(vi) <= limit)) return false;  // also false for NaN
      wi = w[i] - lr * (options_.nesterov ? g + mu * vi : vi);
    }
    if (!(std::fabs(wi) <= limit)) return false;
  }
  return true;
}

StepBound Optimizer::Bound(const StepInputs& in) const {
  const OptimizerOptions& o = options_;
  // The schedule only decays (gamma <= 1), so lr bounds every step's rate.
  const double lr = static_cast<double>(o.learning_rate) * in.scale;
  StepBound b;
  double g = in.max_g;
  double inter = g;
  if (o.dc_lambda > 0.0f && in.max_backup >= 0) {
    const double diff = in.max_w + in.max_backup;
    const double lg = o.dc_lambda * g;
    const double lgg = lg * g;
    const double term = lgg * diff;
    inter = std::max({inter, diff, lg, lgg, term});
    g += term;
  }
  if (o.weight_decay > 0.0f) {
    inter = std::max(inter, o.weight_decay * in.max_w);
    g += o.weight_decay * in.max_w;
  }
  inter = std::max(inter, g);
  double step;
  if (o.momentum == 0.0f) {
    step = lr * g;
  } else {
    b.max_v = o.momentum * in.max_v + g;
    const double dir = o.nesterov ? g + o.momentum * b.max_v : b.max_v;
    inter = std::max(inter, dir);
    step = lr * dir;
  }
  b.max_w = in.max_w + step;
  b.w_step = step;
  b.g_eff = g;
  b.max_intermediate = std::max(inter, step);
  return b;
}

}  // namespace asgd
