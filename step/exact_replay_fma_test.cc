// exact_replay_test can fail: optimizer.cc built with -ffp-contract=fast
// -mfma (//step:optimizer_fma_for_test, what the invariant forbids) gives, on
// the same inputs, the fused result instead of the separately rounded one.
// Skipped on a CPU without FMA, where that build cannot run.
#include <vector>

#include "gtest/gtest.h"
#include "step/exact_replay_cases.h"
#include "step/optimizer.h"

namespace asgd {
namespace {

using exact_replay::ApplyToCases;
using exact_replay::Bits;
using exact_replay::Case;
using exact_replay::CaseArrays;
using exact_replay::FindCases;
using exact_replay::kElements;

bool CpuHasFma() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("fma");
}

TEST(ExactReplayFmaTest, ContractedSgdStepIsFused) {
  if (!CpuHasFma()) GTEST_SKIP() << "this CPU has no FMA";
  const std::vector<Case> cases = FindCases(/*momentum=*/false);
  ASSERT_EQ(cases.size(), kElements);
  const CaseArrays after = ApplyToCases(cases, /*momentum=*/false);
  for (int i = 0; i < kElements; ++i) {
    EXPECT_NE(Bits(after.w[i]), Bits(cases[i].w_ref)) << "element " << i;
    EXPECT_EQ(Bits(after.w[i]), Bits(cases[i].w_fma)) << "element " << i;
  }
}

TEST(ExactReplayFmaTest, ContractedMomentumStepDiffers) {
  if (!CpuHasFma()) GTEST_SKIP() << "this CPU has no FMA";
  const std::vector<Case> cases = FindCases(/*momentum=*/true);
  ASSERT_EQ(cases.size(), kElements);
  const CaseArrays after = ApplyToCases(cases, /*momentum=*/true);
  int differing = 0;
  for (int i = 0; i < kElements; ++i) {
    if (Bits(after.w[i]) != Bits(cases[i].w_ref) ||
        Bits(after.v[i]) != Bits(cases[i].v_ref)) {
      ++differing;
    }
  }
  EXPECT_GT(differing, 0);
}

}  // namespace
}  // namespace asgd
