// Test support for the exact-replay tests: plain-SGD inputs (w, lr, g) on
// which a fused multiply-add, fma(-lr, g, w), rounds differently from the
// separately rounded w - lr * g, found deterministically from a seeded
// generator. Header-only and namespace-neutral, so that a test built with the
// library's namespace renamed can include it too.
#ifndef ASGD_STEP_EXACT_REPLAY_INPUTS_H_
#define ASGD_STEP_EXACT_REPLAY_INPUTS_H_

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

namespace exact_replay {

// w - lr * g with the product rounded to float32 before the subtraction.
inline float Unfused(float w, float lr, float g) {
  volatile float product = lr * g;
  volatile float result = w - product;
  return result;
}

// The same step as one fused multiply-add (one rounding).
inline float Fused(float w, float lr, float g) { return std::fmaf(-lr, g, w); }

inline bool FusedDiffers(float w, float lr, float g) {
  return Fused(w, lr, g) != Unfused(w, lr, g);
}

struct Inputs {
  float lr = 0.0f;
  std::vector<float> w;
  std::vector<float> g;
};

// `count` elements, each one where fusing changes the result.
inline Inputs MakeInputs(int count = 4096) {
  Inputs in;
  in.lr = 0.0371f;
  std::mt19937 rng(20261127);
  std::uniform_real_distribution<float> dist(-2.0f, 2.0f);
  while (static_cast<int>(in.w.size()) < count) {
    const float w = dist(rng);
    const float g = dist(rng);
    if (FusedDiffers(w, in.lr, g)) {
      in.w.push_back(w);
      in.g.push_back(g);
    }
  }
  return in;
}

}  // namespace exact_replay

#endif  // ASGD_STEP_EXACT_REPLAY_INPUTS_H_
