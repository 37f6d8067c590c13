#include "step/admm_apply.h"

#include <algorithm>
#include <cmath>

namespace asgd {

AdmmScan ScanAdmm(const float* w, const float* u, const float* s, int64_t n,
                  int slots, const uint8_t* keep) {
  AdmmScan scan;
  const float count = static_cast<float>(slots);
  bool ok = true;
  double max_delta = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (keep != nullptr && keep[i] == 0) continue;
    const float d = u[i] - s[i];
    const float w_new = w[i] + d / count;
    // Also false for NaN (an infinite d).
    ok &= std::fabs(w_new) <= kMaxMagnitude && std::fabs(u[i]) <= kMaxMagnitude;
    max_delta = std::max(max_delta, static_cast<double>(std::fabs(d)));
  }
  scan.bounded = ok && std::isfinite(max_delta);
  scan.max_delta = max_delta;
  return scan;
}

float AdmmScale(double max_delta, int slots, double max_change) {
  const double change = max_delta / slots;
  if (max_change <= 0 || !(change > max_change)) return 1.0f;
  return std::nextafter(static_cast<float>(max_change / change), 0.0f);
}

ApplyStats ApplyAdmm(float* w, const float* u, float* s, int64_t n, int slots,
                     float scale, const uint8_t* keep) {
  const float count = static_cast<float>(slots);
  float max_w = 0.0f;
  for (int64_t i = 0; i < n; ++i) {
    if (keep == nullptr || keep[i] != 0) {
      const float step = scale * (u[i] - s[i]);
      w[i] = w[i] + step / count;
      s[i] = scale == 1.0f ? u[i] : s[i] + step;
    }
    max_w = std::max(max_w, std::fabs(w[i]));
  }
  return ApplyStats{max_w, 0.0f};
}

}  // namespace asgd
