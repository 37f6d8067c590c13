// Test support for the exact-replay invariant (step/optimizer.h): inputs on
// which a fused multiply-add rounds differently from a product rounded to
// float32 and then added, and the separately rounded reference of one
// optimizer step on them.
//
// Every case is found by a deterministic search (a fixed linear congruential
// sequence), so the tests are the same on every machine.
//
// Thread-safety: pure functions.
#ifndef ASGD_STEP_EXACT_REPLAY_CASES_H_
#define ASGD_STEP_EXACT_REPLAY_CASES_H_

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "step/optimizer.h"

namespace asgd {
namespace exact_replay {

// Elements per case set: not a multiple of any vector width, so that a
// vectorized loop and its scalar remainder both run.
inline constexpr int kElements = 67;
inline constexpr float kLearningRate = 0.1f;
inline constexpr float kMomentum = 0.9f;

inline uint32_t Bits(float x) {
  uint32_t u;
  std::memcpy(&u, &x, sizeof(u));
  return u;
}

// a * b rounded to float32, then c added and rounded. The volatile store
// forces the rounding of the product whatever the compiler flags of this
// file: it is what keeps the reference from being contracted itself.
inline float MulThenAdd(float a, float b, float c) {
  volatile float product = a * b;
  return product + c;
}

// One element's state before a step and the step's results both ways.
struct Case {
  float w = 0, v = 0, g = 0;
  // Separately rounded (the invariant).
  float w_ref = 0, v_ref = 0;
  // Each multiply-add fused (what contraction makes of it).
  float w_fma = 0, v_fma = 0;
};

// Plain SGD, w -= lr * g.
inline void StepSgd(Case* c) {
  c->w_ref = MulThenAdd(-kLearningRate, c->g, c->w);
  c->w_fma = std::fma(-kLearningRate, c->g, c->w);
}

// Momentum SGD: v = mu * v + g; w -= lr * v.
inline void StepMomentum(Case* c) {
  c->v_ref = MulThenAdd(kMomentum, c->v, c->g);
  c->w_ref = MulThenAdd(-kLearningRate, c->v_ref, c->w);
  c->v_fma = std::fma(kMomentum, c->v, c->g);
  c->w_fma = std::fma(-kLearningRate, c->v_fma, c->w);
}

// kElements cases whose fused result differs from the reference (w for
// SGD; w or v with momentum). Values in [-1, 1), never 0.
inline std::vector<Case> FindCases(bool momentum) {
  uint32_t state = momentum ? 12345u : 54321u;
  auto next = [&state] {
    state = state * 1664525u + 1013904223u;
    return static_cast<float>(state >> 8) * 0x1p-23f - 1.0f;
  };
  std::vector<Case> out;
  for (int tries = 0; tries < 1000000 && out.size() < kElements; ++tries) {
    Case c;
    c.w = next();
    c.v = next();
    c.g = next();
    if (c.w == 0 || c.v == 0 || c.g == 0) continue;
    if (momentum) {
      StepMomentum(&c);
    } else {
      StepSgd(&c);
    }
    if (Bits(c.w_ref) != Bits(c.w_fma) ||
        (momentum && Bits(c.v_ref) != Bits(c.v_fma))) {
      out.push_back(c);
    }
  }
  return out;
}

// The optimizer the cases assume: constant learning rate kLearningRate,
// momentum kMomentum or none.
inline OptimizerOptions CaseOptions(bool momentum) {
  OptimizerOptions o;
  o.learning_rate = kLearningRate;
  o.momentum = momentum ? kMomentum : 0.0f;
  return o;
}

// The cases' w, v and g laid out as arrays, one element per case.
struct CaseArrays {
  std::vector<float> w, v, g;
};

inline CaseArrays ToArrays(const std::vector<Case>& cases) {
  CaseArrays a;
  for (const Case& c : cases) {
    a.w.push_back(c.w);
    a.v.push_back(c.v);
    a.g.push_back(c.g);
  }
  return a;
}

// Optimizer::Apply of the linked build over the cases; returns the arrays
// after the step.
inline CaseArrays ApplyToCases(const std::vector<Case>& cases, bool momentum) {
  CaseArrays a = ToArrays(cases);
  const Optimizer optimizer = *Optimizer::Create(CaseOptions(momentum));
  optimizer.Apply(a.w.data(), momentum ? a.v.data() : nullptr, a.g.data(),
                  static_cast<int64_t>(cases.size()), UpdateContext{});
  return a;
}

}  // namespace exact_replay
}  // namespace asgd

#endif  // ASGD_STEP_EXACT_REPLAY_CASES_H_
