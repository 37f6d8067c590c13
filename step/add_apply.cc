#include "step/add_apply.h"

#include <algorithm>
#include <cmath>

namespace asgd {
namespace {

inline float Added(float w, float e, float scale) {
  const float step = scale * e;  // rounded on its own (no FMA, STEP_COPTS)
  return w + step;
}

}  // namespace

ApplyStats ApplyAdd(float* w, const float* e, int64_t n, float scale,
                    const uint8_t* keep) {
  float max_w = 0.0f;
  if (keep == nullptr) {
    for (int64_t i = 0; i < n; ++i) {
      w[i] = Added(w[i], e[i], scale);
      max_w = std::max(max_w, std::fabs(w[i]));
    }
  } else {
    for (int64_t i = 0; i < n; ++i) {
      if (keep[i] != 0) w[i] = Added(w[i], e[i], scale);
      max_w = std::max(max_w, std::fabs(w[i]));
    }
  }
  return ApplyStats{max_w, 0.0f};
}

bool AddStaysBounded(const float* w, const float* e, int64_t n, float scale,
                     const uint8_t* keep) {
  bool ok = true;
  for (int64_t i = 0; i < n; ++i) {
    if (keep != nullptr && keep[i] == 0) continue;
    // Also false for NaN.
    ok &= std::fabs(Added(w[i], e[i], scale)) <= kMaxMagnitude;
  }
  return ok;
}

}  // namespace asgd
