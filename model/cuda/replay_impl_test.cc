// The device replay of delta-pull updates (replay_impl.h, from a ReplayPlan)
// run on the CPU through HostExec, in both element orders, against
// ApplyCompressedRange (step/compressed_apply.h), which is what the worker's
// host replay and the server's apply run: the weights must match bit for
// bit, dense and under a pruned model's mask, and the bound check must
// refuse what the host refuses.
#include "model/cuda/replay_impl.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/types/span.h"
#include "compression/grad_codec.h"
#include "gtest/gtest.h"
#include "model/cuda/host_exec.h"
#include "model/cuda/host_replay_copy.h"
#include "model/cuda/replay_cases.h"
#include "step/compressed_apply.h"
#include "step/optimizer.h"
#include "step/replay_plan.h"

namespace asgd {
namespace {

using cuda_ops::HostExec;
using cuda_ops::ReplayTables;
using replay_cases::Bits;
using replay_cases::FirstDifference;
using replay_cases::MakeUpdate;
using replay_cases::Mask;
using replay_cases::MaskBits;
using replay_cases::PlanOf;
using replay_cases::Prune;
using replay_cases::Sgd;
using replay_cases::TablesOf;
using replay_cases::Update;
using replay_cases::Weights;

TEST(ReplayPlanTest, TablesTileTheSlice) {
  std::mt19937 rng(3);
  const int64_t n = 10007;
  for (int kinds : {0, 1, 2}) {
    const Update u = MakeUpdate(n, kinds, &rng);
    const ReplayPlan p = PlanOf(u);
    EXPECT_EQ(p.count, n);
    ASSERT_GE(p.num_groups(), static_cast<int64_t>(u.chunks.size()));
    EXPECT_EQ(p.group_start.front(), 0);
    EXPECT_EQ(p.group_start.back(), n);
    for (int64_t j = 0; j < p.num_groups(); ++j) {
      EXPECT_LT(p.group_start[j], p.group_start[j + 1]) << j;
    }
    EXPECT_EQ(p.levels.size(), 2 * p.bit_origin.size());
    EXPECT_EQ(static_cast<int64_t>(p.bit_origin.size()), p.num_groups());
    for (size_t j = 1; j < p.indices.size(); ++j) {
      EXPECT_LT(p.indices[j - 1], p.indices[j]);
    }
    EXPECT_EQ(p.all_top_k, kinds == 1);
    int64_t one_bit_bytes = 0, k = 0;
    for (const CompressedChunk& c : u.chunks) {
      if (c.encoding == GradEncoding::kOneBit)
        one_bit_bytes += (c.count + 7) / 8;
      if (c.encoding == GradEncoding::kTopK) k += c.k;
    }
    EXPECT_EQ(static_cast<int64_t>(p.bits.size()), one_bit_bytes);
    EXPECT_EQ(static_cast<int64_t>(p.indices.size()), k);
  }
}

TEST(ReplayPlanTest, TakeLeavesAnEmptyBuilder) {
  std::mt19937 rng(4);
  const Update u = MakeUpdate(500, 2, &rng);
  ReplayPlanBuilder builder;
  for (const CompressedChunk& c : u.chunks) builder.Add(c);
  EXPECT_EQ(builder.Take().count, 500);
  EXPECT_EQ(builder.plan().count, 0);
  EXPECT_EQ(builder.plan().num_groups(), 0);
  EXPECT_TRUE(builder.plan().all_top_k);
  for (const CompressedChunk& c : u.chunks) builder.Add(c);
  EXPECT_EQ(builder.Take().group_start, PlanOf(u).group_start);
}

// Every element's decoded gradient is DecodeCompressed's, bit for bit.
TEST(ReplayImplTest, DecodesWhatTheCodecDecodes) {
  std::mt19937 rng(5);
  const int64_t n = 9001;
  for (int kinds : {0, 1, 2}) {
    const Update u = MakeUpdate(n, kinds, &rng);
    const ReplayPlan p = PlanOf(u);
    const ReplayTables t = TablesOf(p);
    std::vector<float> want(n);
    int64_t at = 0;
    for (const CompressedChunk& c : u.chunks) {
      DecodeCompressed(c, 0, c.count, want.data() + at);
      at += c.count;
    }
    for (int64_t e = 0; e < n; ++e) {
      ASSERT_EQ(Bits(cuda_ops::ReplayGradient(t, e)), Bits(want[e]))
          << "kinds " << kinds << " element " << e;
    }
  }
}

// The dense pass (and the sparse one where it may run) leaves the weights
// ApplyCompressedRange leaves, for every kind of update, with and without
// weight decay, in both element orders.
TEST(ReplayImplTest, MatchesTheHostReplayBitForBit) {
  std::mt19937 rng(6);
  const int64_t n = 10007;
  for (int kinds : {0, 1, 2}) {
    for (float wd : {0.0f, 1e-3f}) {
      const Update u = MakeUpdate(n, kinds, &rng);
      const ReplayPlan p = PlanOf(u);
      const std::vector<float> w0 = Weights(n, &rng);
      const float lr = 0.0371f;
      std::vector<float> want = w0;
      const ApplyStats stats = ApplyCompressedRange(
          Sgd(lr, wd), u.chunks, 0, n, want.data(), nullptr, UpdateContext{});
      ASSERT_LE(stats.max_abs_w, kMaxMagnitude);
      ASSERT_GE(FirstDifference(want, w0), 0) << "the update changed nothing";
      for (auto order :
           {HostExec::Order::kForward, HostExec::Order::kBackward}) {
        HostExec x(order);
        std::vector<float> w = w0;
        int bad = 0;
        ASSERT_TRUE(
            cuda_ops::ReplayDense(x, TablesOf(p), w.data(), lr, wd, &bad).ok());
        EXPECT_EQ(bad, 0);
        EXPECT_EQ(FirstDifference(w, want), -1)
            << "dense, kinds " << kinds << " wd " << wd;
        if (p.all_top_k && wd == 0.0f) {
          std::vector<float> s = w0;
          ASSERT_TRUE(
              cuda_ops::ReplaySparse(x, TablesOf(p), s.data(), lr, &bad).ok());
          EXPECT_EQ(bad, 0);
          EXPECT_EQ(FirstDifference(s, want), -1) << "sparse";
        }
      }
    }
  }
}

// A pruned model's update: both passes under the mask leave the weights
// ApplyCompressedRange leaves under UpdateContext::keep (the server's apply
// and the worker's host replay), pruned weights still 0 of their sign, for
// every kind of update, with and without weight decay, in both orders.
TEST(ReplayImplTest, MatchesTheHostReplayUnderAPruningMask) {
  std::mt19937 rng(8);
  const int64_t n = 10009;
  for (int kinds : {0, 1, 2}) {
    for (float wd : {0.0f, 1e-3f}) {
      const Update u = MakeUpdate(n, kinds, &rng);
      const ReplayPlan p = PlanOf(u);
      const std::vector<uint8_t> keep = Mask(n, 0.7, &rng);
      const std::vector<uint8_t> bits = MaskBits(keep);
      std::vector<float> w0 = Weights(n, &rng);
      Prune(keep, &w0);
      const float lr = 0.0371f;
      std::vector<float> want = w0;
      UpdateContext ctx;
      ctx.keep = keep.data();
      ASSERT_LE(ApplyCompressedRange(Sgd(lr, wd), u.chunks, 0, n, want.data(),
                                     nullptr, ctx)
                    .max_abs_w,
                kMaxMagnitude);
      std::vector<float> dense = w0;
      ApplyCompressedRange(Sgd(lr, wd), u.chunks, 0, n, dense.data(), nullptr,
                           UpdateContext{});
      ASSERT_GE(FirstDifference(want, dense), 0) << "the mask changed nothing";
      for (int64_t e = 0; e < n; ++e) {
        if (keep[e] == 0) {
          ASSERT_EQ(Bits(want[e]), Bits(w0[e])) << e;
        }
      }
      for (auto order :
           {HostExec::Order::kForward, HostExec::Order::kBackward}) {
        HostExec x(order);
        std::vector<float> w = w0;
        int bad = 0;
        ASSERT_TRUE(cuda_ops::ReplayDense(x, TablesOf(p, bits.data()), w.data(),
                                          lr, wd, &bad)
                        .ok());
        EXPECT_EQ(bad, 0);
        EXPECT_EQ(FirstDifference(w, want), -1)
            << "dense, kinds " << kinds << " wd " << wd;
        if (p.all_top_k && wd == 0.0f) {
          std::vector<float> s = w0;
          ASSERT_TRUE(cuda_ops::ReplaySparse(x, TablesOf(p, bits.data()),
                                             s.data(), lr, &bad)
                          .ok());
          EXPECT_EQ(bad, 0);
          EXPECT_EQ(FirstDifference(s, want), -1) << "sparse";
        }
      }
    }
  }
}

// An update that takes a weight past kMaxMagnitude (or to Inf) is flagged,
// where the host's maxima exceed kMaxMagnitude too.
TEST(ReplayImplTest, FlagsWhatTheHostRefuses) {
  std::mt19937 rng(7);
  const int64_t n = 2000;
  for (int kinds : {0, 1}) {
    const Update u = MakeUpdate(n, kinds, &rng);
    const ReplayPlan p = PlanOf(u);
    // The element with the largest |g| moves by lr * |g| >= 1e37 from 0.
    float max_g = 0;
    for (int64_t e = 0; e < n; ++e) {
      max_g =
          std::max(max_g, std::fabs(cuda_ops::ReplayGradient(TablesOf(p), e)));
    }
    ASSERT_GT(max_g, 0.0f);
    const float lr = 3e37f / max_g;
    std::vector<float> want(n, 0.0f);
    const ApplyStats stats = ApplyCompressedRange(
        Sgd(lr, 0.0f), u.chunks, 0, n, want.data(), nullptr, UpdateContext{});
    ASSERT_FALSE(stats.max_abs_w <= kMaxMagnitude);
    HostExec x;
    std::vector<float> w(n, 0.0f);
    int bad = 0;
    ASSERT_TRUE(
        cuda_ops::ReplayDense(x, TablesOf(p), w.data(), lr, 0.0f, &bad).ok());
    EXPECT_EQ(bad, 1) << "kinds " << kinds;
    EXPECT_EQ(FirstDifference(w, want), -1);
    if (p.all_top_k) {
      std::vector<float> s(n, 0.0f);
      bad = 0;
      ASSERT_TRUE(
          cuda_ops::ReplaySparse(x, TablesOf(p), s.data(), lr, &bad).ok());
      EXPECT_EQ(bad, 1);
    }
  }
  // A NaN weight is flagged too (the host's maxima are NaN then).
  const Update u = MakeUpdate(100, 0, &rng);
  const ReplayPlan p = PlanOf(u);
  std::vector<float> w(100, 1.0f);
  w[42] = std::numeric_limits<float>::quiet_NaN();
  int bad = 0;
  HostExec x;
  ASSERT_TRUE(
      cuda_ops::ReplayDense(x, TablesOf(p), w.data(), 0.1f, 0.0f, &bad).ok());
  EXPECT_EQ(bad, 1);
}

// The host copy (what the delta receiver's tests use for a device's) keeps
// the mask of its last upload.
TEST(HostReplayCopyTest, ReplaysUnderTheMaskOfItsLastUpload) {
  std::mt19937 rng(9);
  absl::StatusOr<std::unique_ptr<ExactCopy>> copy = CreateHostReplayCopy(7001);
  ASSERT_TRUE(copy.ok()) << copy.status();
  replay_cases::ExpectReplaysUnderTheMask(copy->get(), &rng);
}

}  // namespace
}  // namespace asgd
