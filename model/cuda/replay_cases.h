// Test support for the device replay of delta-pull updates (replay_impl.h,
// cuda_replay.h): random updates of every encoding mix, their plans, weights
// with the awkward values (signed zeros, subnormals), pruning masks, and the
// comparison of two weight vectors bit for bit.
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
#include "common/wire_codec.h"
#include "compression/grad_codec.h"
#include "gtest/gtest.h"
#include "model/cuda/replay_impl.h"
#include "model/exact_copy.h"
#include "step/compressed_apply.h"
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

// A pruned model's mask over n elements, about `pruned` of them 0.
inline std::vector<uint8_t> Mask(int64_t n, double pruned, std::mt19937* rng) {
  std::bernoulli_distribution cut(pruned);
  std::vector<uint8_t> keep(n);
  for (uint8_t& k : keep) k = cut(*rng) ? 0 : 1;
  return keep;
}

// The mask's bits, as ReplayTables::keep_bits reads them.
inline std::vector<uint8_t> MaskBits(const std::vector<uint8_t>& keep) {
  const int64_t n = static_cast<int64_t>(keep.size());
  std::vector<uint8_t> bits(PruneMaskBytes(n));
  PackPruneMask(keep.data(), n, reinterpret_cast<char*>(bits.data()));
  return bits;
}

// The pruned weights of `w` set to 0, every other one -0 (a pruned weight
// is 0 of either sign, as a server may hold it).
inline void Prune(const std::vector<uint8_t>& keep, std::vector<float>* w) {
  bool negative = false;
  for (size_t i = 0; i < keep.size(); ++i) {
    if (keep[i] != 0) continue;
    (*w)[i] = negative ? -0.0f : 0.0f;
    negative = !negative;
  }
}

inline int FirstDifference(const std::vector<float>& a,
                           const std::vector<float>& b) {
  for (size_t i = 0; i < a.size(); ++i) {
    if (Bits(a[i]) != Bits(b[i])) return static_cast<int>(i);
  }
  return -1;
}

// An ExactCopy of n elements against ApplyCompressedRange: weights uploaded
// with a 70% mask, then 9 updates of every kind, with and without weight
// decay, each replayed under the mask as the server's apply does
// (UpdateContext::keep); a mask of the wrong size refused with the copy
// unchanged; weights uploaded without a mask replayed densely again.
inline void ExpectReplaysUnderTheMask(ExactCopy* copy, std::mt19937* rng) {
  const int64_t n = copy->size();
  const std::vector<uint8_t> keep = Mask(n, 0.7, rng);
  std::vector<float> host = Weights(n, rng);
  Prune(keep, &host);
  ASSERT_TRUE(copy->Upload(host, keep).ok());
  std::vector<float> got(n);
  auto expect_host = [&](const std::string& when) {
    ASSERT_TRUE(copy->Download(absl::MakeSpan(got)).ok());
    ASSERT_EQ(FirstDifference(got, host), -1) << when;
  };
  UpdateContext masked;
  masked.keep = keep.data();
  for (int step = 0; step < 9; ++step) {
    const Update u = MakeUpdate(n, step % 3, rng);
    const float lr = 0.01f + 0.001f * step;
    const float wd = step % 2 == 0 ? 0.0f : 1e-3f;
    ApplyCompressedRange(Sgd(lr, wd), u.chunks, 0, n, host.data(), nullptr,
                         masked);
    ASSERT_TRUE(copy->Replay(PlanOf(u), lr, wd).ok());
    expect_host("after update " + std::to_string(step));
  }
  for (int64_t e = 0; e < n; ++e) {
    if (keep[e] == 0) {
      ASSERT_EQ(host[e], 0.0f) << "pruned weight " << e;
    }
  }
  const std::vector<uint8_t> short_mask(keep.begin(), keep.end() - 1);
  EXPECT_EQ(copy->Upload(std::vector<float>(n, 1.0f), short_mask).code(),
            absl::StatusCode::kInvalidArgument);
  expect_host("after a refused upload");
  ASSERT_TRUE(copy->Upload(host).ok());  // dense from here on
  const Update u = MakeUpdate(n, 2, rng);
  ApplyCompressedRange(Sgd(0.02f, 1e-3f), u.chunks, 0, n, host.data(), nullptr,
                       UpdateContext{});
  ASSERT_TRUE(copy->Replay(PlanOf(u), 0.02f, 1e-3f).ok());
  expect_host("after a dense upload");
}

}  // namespace replay_cases
}  // namespace asgd

#endif  // ASGD_MODEL_CUDA_REPLAY_CASES_H_
