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

TEST(ConsensusRulesTest, AdmmGradientShareAndDuals) {
  const std::vector<float> x = {1.0f, 2.0f};
  const std::vector<float> z = {0.5f, 3.0f};
  std::vector<float> lam = {0.25f, -1.0f};
  std::vector<float> g = {1.0f, 1.0f};
  // g + lam + rho (x - z), rho = 2: 1 + 0.25 + 1 = 2.25; 1 - 1 - 2 = -2.
  AugmentAdmmGradient(x, z, lam, 2.0f, absl::MakeSpan(g));
  EXPECT_EQ(g, (std::vector<float>{2.25f, -2.0f}));
  // u = x + lam / rho = {1.125, 1.5}; share = (u - u_sent) / 4.
  std::vector<float> u(2), share(2);
  AdmmShare(x, lam, std::vector<float>{0.125f, 0.5f}, 2.0f, 4,
            absl::MakeSpan(u), absl::MakeSpan(share));
  EXPECT_EQ(u, (std::vector<float>{1.125f, 1.5f}));
  EXPECT_EQ(share, (std::vector<float>{0.25f, 0.25f}));
  // lam += rho (x - z) = {0.25 + 1, -1 - 2}.
  AdmmDualStep(x, z, 2.0f, absl::MakeSpan(lam));
  EXPECT_EQ(lam, (std::vector<float>{1.25f, -3.0f}));
}

TEST(ConsensusRulesTest, AdmmSharesOfEveryWorkerSumToTheAverage) {
  // Two workers start from z0 = u_sent = 1 with lam = 0; after local steps
  // each sends its share. z0 + both shares is the average of their u.
  const float z0 = 1.0f, rho = 0.5f;
  const std::vector<float> x1 = {2.0f}, lam1 = {0.5f};   // u1 = 3
  const std::vector<float> x2 = {0.0f}, lam2 = {-0.5f};  // u2 = -1
  std::vector<float> u(1), s1(1), s2(1);
  AdmmShare(x1, lam1, std::vector<float>{z0}, rho, 2, absl::MakeSpan(u),
            absl::MakeSpan(s1));
  EXPECT_EQ(u[0], 3.0f);
  AdmmShare(x2, lam2, std::vector<float>{z0}, rho, 2, absl::MakeSpan(u),
            absl::MakeSpan(s2));
  EXPECT_EQ(u[0], -1.0f);
  EXPECT_EQ(z0 + s1[0] + s2[0], (3.0f + -1.0f) / 2);
}

}  // namespace
}  // namespace asgd
