// The other half of exact_replay_test: the optimizer built the way step/BUILD
// forbids (-ffp-contract=fast on an FMA target; namespace renamed by the
// build so that it is a separate copy) does differ from the separately
// rounded reference on exact_replay_test's inputs. So that test would fail on
// such a build: its check can fail.
#include <cstring>
#include <vector>

#include "gtest/gtest.h"
#include "step/exact_replay_inputs.h"
#include "step/optimizer.h"

namespace asgd {  // asgd_contracted in this build
namespace {

TEST(ExactReplayContractedTest, AFusingBuildDiffersOnTheInputs) {
  if (!__builtin_cpu_supports("fma")) {
    GTEST_SKIP() << "this CPU has no FMA instructions";
  }
  const exact_replay::Inputs in = exact_replay::MakeInputs();
  absl::StatusOr<Optimizer> opt = Optimizer::Create({.learning_rate = in.lr});
  ASSERT_TRUE(opt.ok()) << opt.status();
  std::vector<float> w = in.w;
  opt->Apply(w.data(), nullptr, in.g.data(), static_cast<int64_t>(w.size()),
             {});
  int differ = 0;
  for (size_t i = 0; i < w.size(); ++i) {
    const float unfused = exact_replay::Unfused(in.w[i], in.lr, in.g[i]);
    if (std::memcmp(&w[i], &unfused, sizeof(float)) != 0) ++differ;
  }
  // The contracted build computes fma(-lr, g, w) for most elements (a loop
  // remainder may not be vectorised, and may or may not be contracted).
  EXPECT_GT(differ, static_cast<int>(w.size()) / 2)
      << "a build with -ffp-contract=fast -mfma no longer fuses the step: "
         "exact_replay_test's inputs may no longer detect a fusing build";
}

}  // namespace
}  // namespace asgd
