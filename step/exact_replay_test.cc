// The exact-replay invariant of step/optimizer.h: the library's arithmetic
// is one separately rounded float32 operation at a time, in the written
// order, so a worker's replay equals the server's apply bit for bit. The
// inputs are chosen where a fused multiply-add rounds differently from a
// multiply then an add, so a build of step/ that fuses (contraction on an
// FMA target) fails here. exact_replay_contracted_test shows that such a
// build does differ on these inputs.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "compression/grad_codec.h"
#include "gtest/gtest.h"
#include "step/compressed_apply.h"
#include "step/exact_replay_inputs.h"
#include "step/optimizer.h"

namespace asgd {
namespace {

using exact_replay::FusedDiffers;
using exact_replay::Inputs;
using exact_replay::MakeInputs;
using exact_replay::Unfused;

TEST(ExactReplayTest, InputsAreWhereFusingRoundsDifferently) {
  const Inputs in = MakeInputs();
  int differ = 0;
  for (size_t i = 0; i < in.w.size(); ++i) {
    if (FusedDiffers(in.w[i], in.lr, in.g[i])) ++differ;
  }
  // Every input was picked for it (a test of the test).
  EXPECT_EQ(differ, static_cast<int>(in.w.size()));
}

TEST(ExactReplayTest, PlainSgdIsSeparatelyRounded) {
  const Inputs in = MakeInputs();
  absl::StatusOr<Optimizer> opt = Optimizer::Create({.learning_rate = in.lr});
  ASSERT_TRUE(opt.ok()) << opt.status();
  std::vector<float> w = in.w;
  opt->Apply(w.data(), nullptr, in.g.data(), static_cast<int64_t>(w.size()),
             {});
  for (size_t i = 0; i < w.size(); ++i) {
    const float want = Unfused(in.w[i], in.lr, in.g[i]);
    ASSERT_EQ(0, std::memcmp(&w[i], &want, sizeof(float)))
        << "element " << i << ": " << w[i] << " vs " << want
        << " (a fused multiply-add: the build of step/ contracts)";
  }
}

TEST(ExactReplayTest, StepWithDecayMatchesItsWrittenOrder) {
  // g' = g + wd * w, then w - lr * g', each operation rounded alone.
  const Inputs in = MakeInputs();
  const float wd = 0.01f;
  absl::StatusOr<Optimizer> opt =
      Optimizer::Create({.learning_rate = in.lr, .weight_decay = wd});
  ASSERT_TRUE(opt.ok()) << opt.status();
  std::vector<float> w = in.w;
  opt->Apply(w.data(), nullptr, in.g.data(), static_cast<int64_t>(w.size()),
             {});
  for (size_t i = 0; i < w.size(); ++i) {
    volatile float decay = wd * in.w[i];
    volatile float g = in.g[i] + decay;
    const float want = Unfused(in.w[i], in.lr, g);
    ASSERT_EQ(0, std::memcmp(&w[i], &want, sizeof(float))) << "element " << i;
  }
}

TEST(ExactReplayTest, CompressedApplyIsTheSameArithmetic) {
  // A top-k chunk that keeps every element (so its values are the inputs
  // exactly), through the decode + apply the server and the worker's replay
  // run.
  const Inputs in = MakeInputs();
  const int64_t n = static_cast<int64_t>(in.g.size());
  std::string bytes;
  std::vector<float> residual(in.g.size(), 0.0f);
  ASSERT_TRUE(
      EncodeTopK(in.g, n, absl::MakeSpan(residual), &bytes).ok());
  absl::StatusOr<CompressedChunk> chunk = ParseCompressedChunk(bytes, {});
  ASSERT_TRUE(chunk.ok()) << chunk.status();
  std::vector<float> g(in.g.size());
  DecodeCompressed(*chunk, 0, n, g.data());
  ASSERT_EQ(g, in.g);
  absl::StatusOr<Optimizer> opt = Optimizer::Create({.learning_rate = in.lr});
  ASSERT_TRUE(opt.ok());
  std::vector<float> fused = in.w;
  ApplyCompressed(*opt, *chunk, 0, n, fused.data(), nullptr, {});
  for (int64_t i = 0; i < n; ++i) {
    const float want = Unfused(in.w[i], in.lr, g[i]);
    ASSERT_EQ(0, std::memcmp(&fused[i], &want, sizeof(float)))
        << "element " << i;
  }
}

}  // namespace
}  // namespace asgd
