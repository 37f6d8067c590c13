#include "step/add_apply.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "gtest/gtest.h"

namespace asgd {
namespace {

TEST(AddApplyTest, AddsScaledValuesByHand) {
  std::vector<float> w = {1.0f, -2.0f, 0.5f, 0.0f};
  const std::vector<float> e = {0.25f, 1.0f, -0.5f, 3.0f};
  const ApplyStats stats = ApplyAdd(w.data(), e.data(), 4, 0.5f, nullptr);
  EXPECT_EQ(w, (std::vector<float>{1.125f, -1.5f, 0.25f, 1.5f}));
  EXPECT_EQ(stats.max_abs_w, 1.5f);
  EXPECT_EQ(stats.max_abs_v, 0.0f);
}

TEST(AddApplyTest, PrunedWeightsStayZero) {
  std::vector<float> w = {1.0f, 0.0f, 2.0f};
  const std::vector<float> e = {1.0f, 5.0f, -1.0f};
  const std::vector<uint8_t> keep = {1, 0, 1};
  const ApplyStats stats = ApplyAdd(w.data(), e.data(), 3, 1.0f, keep.data());
  EXPECT_EQ(w, (std::vector<float>{2.0f, 0.0f, 1.0f}));
  EXPECT_EQ(stats.max_abs_w, 2.0f);
  // A pruned weight's value does not count against the bound either.
  EXPECT_TRUE(AddStaysBounded(w.data(), std::vector<float>{0, 1e38f, 0}.data(),
                              3, 1.0f, keep.data()));
}

TEST(AddApplyTest, ProductAndSumRoundedSeparately) {
  // scale * e rounds before the sum: with a fused multiply-add the last bit
  // would differ for these values.
  const float w0 = -1.0f;
  const float e0 = 1.0f + std::ldexp(1.0f, -23);
  const float scale = 1.0f - std::ldexp(1.0f, -24);
  float w = w0;
  ApplyAdd(&w, &e0, 1, scale, nullptr);
  const float product = scale * e0;
  EXPECT_EQ(product, 1.0f);
  EXPECT_EQ(w, 0.0f);
  const double exact = static_cast<double>(w0) +
                       static_cast<double>(scale) * static_cast<double>(e0);
  EXPECT_NE(w, static_cast<float>(exact));
}

TEST(AddApplyTest, StaysBoundedSeesOverflowAndNaN) {
  const float big = static_cast<float>(kMaxMagnitude * 0.75);
  const float half = static_cast<float>(kMaxMagnitude * 0.5);
  const std::vector<float> w = {1.0f, big};
  EXPECT_TRUE(AddStaysBounded(w.data(), std::vector<float>{1, 0}.data(), 2,
                              1.0f, nullptr));
  EXPECT_FALSE(AddStaysBounded(
      w.data(), std::vector<float>{0, half}.data(), 2, 1.0f,
      nullptr));
  EXPECT_FALSE(AddStaysBounded(
      w.data(),
      std::vector<float>{std::numeric_limits<float>::quiet_NaN(), 0}.data(), 2,
      1.0f, nullptr));
}

}  // namespace
}  // namespace asgd
