// Test support for the device replay of delta-pull updates (replay_impl.h,
// cuda_replay.h): random updates of every encoding mix, their plans, weights
// with the awkward values (signed zeros, subnormals), and the comparison of
// two weight vectors bit for bit.
//
// Thread-safety: pure functions.
#ifndef ASGD_MODEL_CUDA_REPLAY_CASES_H_
#define ASGD_MODEL_CUDA_REPLAY_CASES_H_

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "absl/types/span.h"
#include "compression/grad_codec.h"
#include "gtest/gtest.h"
#include "model/cuda/replay_impl.h"
#include "step/optimizer.h"
#include "step/replay_plan.h"

namespace asgd {
namespace replay_cases {

inline uint32_t Bits(float x) {
  uint32_t u;
  std::memcpy(&u, &x, sizeof(u));
  return u;
}

using cuda_ops::TablesOf;

// One update: its chunks' bytes (kept alive) and their parsed views.
struct Update {
  std::vector<std::string> bytes;
  std::vector<CompressedChunk> chunks;
};

inline std::vector<float> Random(int64_t n, std::mt19937* rng, float scale) {
  std::normal_distribution<float> normal(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = normal(*rng);
  return v;
}

// Chunks of random sizes tiling n elements; `kinds`: 0 one-bit only, 1
// top-k only, 2 mixed.
inline Update MakeUpdate(int64_t n, int kinds, std::mt19937* rng) {
  Update u;
  int64_t at = 0;
  while (at < n) {
    const int64_t count = std::min<int64_t>(n - at, 1 + (*rng)() % 3000);
    const bool one_bit = kinds == 0 || (kinds == 2 && (*rng)() % 2 == 0);
    const std::vector<float> grad = Random(count, rng, 1.0f);
    std::vector<float> residual = Random(count, rng, 0.1f);
    std::string bytes;
    absl::Status s;
    if (one_bit) {
      const int64_t g = 1 + (*rng)() % 700;
      const int64_t f = 1 + (*rng)() % std::min<int64_t>(g, count);
      s = EncodeOneBit(grad, g, f, absl::MakeSpan(residual), &bytes);
    } else {
      // Some chunks select nothing.
      const int64_t k = (*rng)() % 5 == 0 ? 0 : 1 + (*rng)() % count;
      s = EncodeTopK(grad, k, absl::MakeSpan(residual), &bytes);
    }
    EXPECT_TRUE(s.ok()) << s;
    u.bytes.push_back(std::move(bytes));
    at += count;
  }
  CodecLimits limits;
  limits.max_elements = n;
  for (const std::string& b : u.bytes) {
    absl::StatusOr<CompressedChunk> c = ParseCompressedChunk(b, limits);
    EXPECT_TRUE(c.ok()) << c.status();
    u.chunks.push_back(*c);
  }
  return u;
}

inline ReplayPlan PlanOf(const Update& u) {
  ReplayPlanBuilder builder;
  for (const CompressedChunk& c : u.chunks) builder.Add(c);
  return builder.Take();
}

inline Optimizer Sgd(float lr, float wd) {
  OptimizerOptions o;
  o.learning_rate = lr;
  o.weight_decay = wd;
  absl::StatusOr<Optimizer> opt = Optimizer::Create(o);
  EXPECT_TRUE(opt.ok());
  return *opt;
}

// Weights with signed zeros, subnormals and values where a fused
// multiply-add would round differently from the separate operations.
inline std::vector<float> Weights(int64_t n, std::mt19937* rng) {
  std::vector<float> w = Random(n, rng, 0.5f);
  for (int64_t i = 0; i < n; i += 37) w[i] = -0.0f;
  for (int64_t i = 5; i < n; i += 41) w[i] = 0.0f;
  for (int64_t i = 11; i < n; i += 53) {
    w[i] = std::numeric_limits<float>::denorm_min() * (1 + i % 7);
  }
  return w;
}

inline int FirstDifference(const std::vector<float>& a,
                           const std::vector<float>& b) {
  for (size_t i = 0; i < a.size(); ++i) {
    if (Bits(a[i]) != Bits(b[i])) return static_cast<int>(i);
  }
  return -1;
}

}  // namespace replay_cases
}  // namespace asgd

#endif  // ASGD_MODEL_CUDA_REPLAY_CASES_H_
