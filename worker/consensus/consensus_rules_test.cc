#include "worker/consensus/consensus_rules.h"

#include <vector>

#include "gtest/gtest.h"
#include "worker/peer/peer_model.h"

namespace asgd {
namespace {

// Values chosen so that every result is exact in float32.
TEST(ConsensusRulesTest, DistanceAndSgdStep) {
  const std::vector<float> x = {3.0f, 1.0f, -2.0f};
  const std::vector<float> z = {0.0f, 1.0f, 2.0f};
  EXPECT_DOUBLE_EQ(L2Distance(x, z), 5.0);  // sqrt(9 + 0 + 16)
  std::vector<float> w = {1.0f, 2.0f, 3.0f};
  SgdStep(std::vector<float>{1.0f, -2.0f, 0.5f}, 0.25f, absl::MakeSpan(w));
  EXPECT_EQ(w, (std::vector<float>{0.75f, 2.5f, 2.875f}));
}

TEST(ConsensusRulesTest, ElasticStepMovesBothEndsByTheSameDifference) {
  std::vector<float> x = {2.0f, -1.0f, 0.5f};
  std::vector<float> z = {1.0f, 1.0f, 0.5f};
  std::vector<float> e(3);
  ElasticDifference(x, z, 0.25f, absl::MakeSpan(e));
  EXPECT_EQ(e, (std::vector<float>{0.25f, -0.5f, 0.0f}));
  ElasticStep(e, absl::MakeSpan(x));
  EXPECT_EQ(x, (std::vector<float>{1.75f, -0.5f, 0.5f}));
  // What the servers do with the same e: z + e. The spring's two ends
  // moved toward each other and their sum is unchanged.
  for (size_t i = 0; i < z.size(); ++i) z[i] += e[i];
  EXPECT_EQ(z, (std::vector<float>{1.25f, 0.5f, 0.5f}));
}

TEST(ConsensusRulesTest, AdmmGradientPointAndDuals) {
  const std::vector<float> x = {1.0f, 2.0f};
  const std::vector<float> z = {0.5f, 3.0f};
  std::vector<float> lam = {0.25f, -1.0f};
  std::vector<float> g = {1.0f, 1.0f};
  // g + lam + rho (x - z), rho = 2: 1 + 0.25 + 1 = 2.25; 1 - 1 - 2 = -2.
  AugmentAdmmGradient(x, z, lam, 2.0f, absl::MakeSpan(g));
  EXPECT_EQ(g, (std::vector<float>{2.25f, -2.0f}));
  // u = x + lam / rho = {1.125, 1.5}.
  std::vector<float> u(2);
  AdmmPoint(x, lam, 2.0f, absl::MakeSpan(u));
  EXPECT_EQ(u, (std::vector<float>{1.125f, 1.5f}));
  // lam += rho (x - z) = {0.25 + 1, -1 - 2}.
  AdmmDualStep(x, z, 2.0f, absl::MakeSpan(lam));
  EXPECT_EQ(lam, (std::vector<float>{1.25f, -3.0f}));
}

TEST(ConsensusRulesTest, ADualTakenFromASlotGivesBackItsPoint) {
  // A worker restarted at x = z takes over a slot whose point is u.
  const std::vector<float> z = {0.5f, -1.0f};
  const std::vector<float> slot = {1.5f, -0.25f};
  const float rho = 0.5f;
  std::vector<float> lam(2), u(2);
  AdmmDualOfPoint(slot, z, rho, absl::MakeSpan(lam));
  EXPECT_EQ(lam, (std::vector<float>{0.5f, 0.375f}));  // rho (u - x)
  AdmmPoint(z, lam, rho, absl::MakeSpan(u));
  EXPECT_EQ(u, slot);  // its first push leaves the average where it was
}

}  // namespace
}  // namespace asgd
