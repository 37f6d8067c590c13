// The exact-replay invariant (step/optimizer.h) checked where it breaks: on
// inputs where a fused multiply-add rounds differently from a product rounded
// and then added, the step libraries give the separately rounded result bit
// for bit, and therefore not the fused one. A build that contracts the step
// (-ffp-contract=fast with an FMA-capable -march) or reorders it fails here;
// exact_replay_fma_test shows that such a build does fail.
#include <cstdint>
#include <string>
#include <vector>

#include "absl/types/span.h"
#include "compression/grad_codec.h"
#include "gtest/gtest.h"
#include "step/compressed_apply.h"
#include "step/exact_replay_cases.h"
#include "step/optimizer.h"

namespace asgd {
namespace {

using exact_replay::ApplyToCases;
using exact_replay::Bits;
using exact_replay::Case;
using exact_replay::CaseArrays;
using exact_replay::CaseOptions;
using exact_replay::FindCases;
using exact_replay::kElements;

TEST(ExactReplayTest, FindsCasesWhereFusingChangesTheResult) {
  for (bool momentum : {false, true}) {
    const std::vector<Case> cases = FindCases(momentum);
    ASSERT_EQ(cases.size(), kElements) << "momentum " << momentum;
    for (const Case& c : cases) {
      EXPECT_TRUE(Bits(c.w_ref) != Bits(c.w_fma) ||
                  Bits(c.v_ref) != Bits(c.v_fma));
    }
  }
}

TEST(ExactReplayTest, SgdStepIsSeparatelyRounded) {
  const std::vector<Case> cases = FindCases(/*momentum=*/false);
  ASSERT_EQ(cases.size(), kElements);
  const CaseArrays after = ApplyToCases(cases, /*momentum=*/false);
  for (int i = 0; i < kElements; ++i) {
    const Case& c = cases[i];
    EXPECT_EQ(Bits(after.w[i]), Bits(c.w_ref))
        << "element " << i << ": w " << c.w << " g " << c.g;
    // The test can fail: a fused step would have given another float.
    EXPECT_NE(Bits(after.w[i]), Bits(c.w_fma)) << "element " << i;
  }
}

TEST(ExactReplayTest, MomentumStepIsSeparatelyRounded) {
  const std::vector<Case> cases = FindCases(/*momentum=*/true);
  ASSERT_EQ(cases.size(), kElements);
  const CaseArrays after = ApplyToCases(cases, /*momentum=*/true);
  for (int i = 0; i < kElements; ++i) {
    const Case& c = cases[i];
    EXPECT_EQ(Bits(after.v[i]), Bits(c.v_ref)) << "element " << i;
    EXPECT_EQ(Bits(after.w[i]), Bits(c.w_ref)) << "element " << i;
    EXPECT_TRUE(Bits(after.w[i]) != Bits(c.w_fma) ||
                Bits(after.v[i]) != Bits(c.v_fma))
        << "element " << i;
  }
}

// The path a delta-pull replay takes: a top-k chunk that selects every
// element (its values travel exactly), applied sparsely without momentum and
// densely with it.
TEST(ExactReplayTest, CompressedApplyIsSeparatelyRounded) {
  for (bool momentum : {false, true}) {
    SCOPED_TRACE(momentum ? "momentum" : "sgd");
    const std::vector<Case> cases = FindCases(momentum);
    ASSERT_EQ(cases.size(), kElements);
    CaseArrays a = exact_replay::ToArrays(cases);
    std::vector<float> residual(kElements, 0.0f);
    std::string bytes;
    ASSERT_TRUE(
        EncodeTopK(a.g, kElements, absl::MakeSpan(residual), &bytes).ok());
    const absl::StatusOr<CompressedChunk> chunk =
        ParseCompressedChunk(bytes, CodecLimits{});
    ASSERT_TRUE(chunk.ok()) << chunk.status();
    const Optimizer optimizer = *Optimizer::Create(CaseOptions(momentum));
    ApplyCompressed(optimizer, *chunk, 0, kElements, a.w.data(),
                    momentum ? a.v.data() : nullptr, UpdateContext{});
    for (int i = 0; i < kElements; ++i) {
      EXPECT_EQ(Bits(a.w[i]), Bits(cases[i].w_ref)) << "element " << i;
      if (momentum) {
        EXPECT_EQ(Bits(a.v[i]), Bits(cases[i].v_ref)) << "element " << i;
      }
    }
  }
}

}  // namespace
}  // namespace asgd
