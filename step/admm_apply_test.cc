#include "step/admm_apply.h"

#include <cmath>
#include <limits>
#include <vector>

#include "gtest/gtest.h"

namespace asgd {
namespace {

// Two slots: the consensus is their average. Values chosen so that every
// operation is exact in float32.
TEST(AdmmApplyTest, ReplacesTheSlotsPointInTheAverage) {
  // z = (s0 + s1) / 2 with s0 = {1, 2, 3}, s1 = {3, 2, 1}.
  std::vector<float> w = {2.0f, 2.0f, 2.0f};
  std::vector<float> s0 = {1.0f, 2.0f, 3.0f};
  const std::vector<float> u = {5.0f, 2.0f, -1.0f};
  const AdmmScan scan = ScanAdmm(w.data(), u.data(), s0.data(), 3, 2, nullptr);
  EXPECT_TRUE(scan.bounded);
  EXPECT_DOUBLE_EQ(scan.max_delta, 4.0);
  const ApplyStats stats =
      ApplyAdmm(w.data(), u.data(), s0.data(), 3, 2, 1.0f, nullptr);
  // d = {4, 0, -4}; w += d / 2; s0 = u.
  EXPECT_EQ(w, (std::vector<float>{4.0f, 2.0f, 0.0f}));
  EXPECT_EQ(s0, u);
  EXPECT_FLOAT_EQ(stats.max_abs_w, 4.0f);
  // The average of the slots again: (u + s1) / 2.
  EXPECT_EQ(w[0], (5.0f + 3.0f) / 2);
  EXPECT_EQ(w[2], (-1.0f + 1.0f) / 2);
}

TEST(AdmmApplyTest, TheSamePointAgainChangesNothing) {
  std::vector<float> w = {0.25f, -0.5f};
  std::vector<float> s = {1.5f, 0.75f};
  const std::vector<float> u = s;
  ApplyAdmm(w.data(), u.data(), s.data(), 2, 4, 1.0f, nullptr);
  EXPECT_EQ(w, (std::vector<float>{0.25f, -0.5f}));
  EXPECT_EQ(s, u);
}

TEST(AdmmApplyTest, AFullStepLeavesTheSlotExactlyThePoint) {
  // 0.1 + (0.3 - 0.1) is not 0.3 in float32; the slot must hold u itself.
  std::vector<float> w = {0.1f};
  std::vector<float> s = {0.1f};
  const std::vector<float> u = {0.3f};
  ApplyAdmm(w.data(), u.data(), s.data(), 1, 3, 1.0f, nullptr);
  EXPECT_EQ(s[0], 0.3f);
  EXPECT_EQ(w[0], 0.1f + (0.3f - 0.1f) / 3.0f);
}

TEST(AdmmApplyTest, AScaledStepMovesTheSlotAndTheAverageAlike) {
  std::vector<float> w = {0.0f};
  std::vector<float> s = {0.0f};
  const std::vector<float> u = {8.0f};
  // Four slots, scale 0.5: step 4, w += 1, s += 4.
  ApplyAdmm(w.data(), u.data(), s.data(), 1, 4, 0.5f, nullptr);
  EXPECT_EQ(w[0], 1.0f);
  EXPECT_EQ(s[0], 4.0f);
}

TEST(AdmmApplyTest, PrunedElementsStayAsTheyAre) {
  std::vector<float> w = {0.0f, 1.0f};
  std::vector<float> s = {0.0f, 1.0f};
  const std::vector<float> u = {7.0f, 3.0f};
  const std::vector<uint8_t> keep = {0, 1};
  const AdmmScan scan =
      ScanAdmm(w.data(), u.data(), s.data(), 2, 2, keep.data());
  EXPECT_DOUBLE_EQ(scan.max_delta, 2.0);  // the pruned element's 7 not seen
  ApplyAdmm(w.data(), u.data(), s.data(), 2, 2, 1.0f, keep.data());
  EXPECT_EQ(w, (std::vector<float>{0.0f, 2.0f}));
  EXPECT_EQ(s, (std::vector<float>{0.0f, 3.0f}));
}

TEST(AdmmApplyTest, ScanRefusesWhatWouldLeaveTheBound) {
  const float big = std::numeric_limits<float>::max();
  std::vector<float> w = {0.0f};
  std::vector<float> s = {-big};
  std::vector<float> u = {big};  // d overflows to +Inf
  EXPECT_FALSE(ScanAdmm(w.data(), u.data(), s.data(), 1, 2, nullptr).bounded);
  s[0] = 0.0f;
  u[0] = 1e38f;  // finite, but past kMaxMagnitude
  EXPECT_FALSE(ScanAdmm(w.data(), u.data(), s.data(), 1, 1, nullptr).bounded);
  u[0] = 1e36f;
  EXPECT_TRUE(ScanAdmm(w.data(), u.data(), s.data(), 1, 2, nullptr).bounded);
}

TEST(AdmmApplyTest, ScaleKeepsTheMoveWithinMaxChange) {
  EXPECT_EQ(AdmmScale(4.0, 2, 0), 1.0f);       // no bound
  EXPECT_EQ(AdmmScale(4.0, 2, 2.0), 1.0f);     // moves 2: at the bound
  const float scale = AdmmScale(4.0, 2, 0.5);  // moves 2: 0.25 of it
  EXPECT_LT(scale, 0.25f);
  EXPECT_GT(scale, 0.2499f);
  EXPECT_LE(4.0f * scale / 2, 0.5f);
}

}  // namespace
}  // namespace asgd
