// PeerModel's averaging arithmetic, without any transport: the exchange is
// exact when nothing interferes and conserves the pair's sum when something
// does.
#include "worker/peer/peer_model.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace asgd {
namespace {

std::vector<float> Random(int n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0, 3);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

std::vector<float> Values(const PeerModel& m) {
  std::vector<float> v(m.size());
  m.Read(absl::MakeSpan(v));
  return v;
}

bool BitwiseEqual(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() &&
         std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

TEST(PeerModelTest, ExchangeLeavesBothBitwiseAtTheAverage) {
  std::vector<float> va = Random(1000, 1), vb = Random(1000, 2);
  // Edge values: signed zeros, a denormal, large magnitudes.
  va[0] = 0.0f;
  vb[0] = -0.0f;
  va[1] = -0.0f;
  vb[1] = -0.0f;
  va[2] = std::numeric_limits<float>::denorm_min();
  vb[2] = 0.0f;
  va[3] = 3e38f;
  vb[3] = 3e38f;
  va[4] = 1.0f;
  vb[4] = 1.0f + std::numeric_limits<float>::epsilon();
  PeerModel a(va), b(vb);

  std::vector<float> sent = Values(a), theirs(1000);
  const double distance = b.AverageAsResponder(sent, absl::MakeSpan(theirs));
  a.AverageAsInitiator(sent, theirs);

  std::vector<float> want(1000);
  for (int i = 0; i < 1000; ++i) want[i] = (va[i] + vb[i]) * 0.5f;
  EXPECT_TRUE(BitwiseEqual(Values(a), want));
  EXPECT_TRUE(BitwiseEqual(Values(b), want));
  EXPECT_TRUE(BitwiseEqual(theirs, vb));  // the responder's model before
  EXPECT_TRUE(std::isinf(want[3]));       // overflow stays IEEE: 3e38+3e38
  EXPECT_NEAR(distance, L2Distance(va, vb), 1e-9 * distance);
}

TEST(PeerModelTest, ChangesDuringTheExchangeAreKeptAndTheSumConserved) {
  const int n = 257;
  std::vector<float> va = Random(n, 3), vb = Random(n, 4), g = Random(n, 5);
  PeerModel a(va), b(vb);
  std::vector<float> sent = Values(a), theirs(n);
  // While the exchange is on the wire, `a` takes a gradient step.
  a.ApplyGradient(g, 0.1f);
  b.AverageAsResponder(sent, absl::MakeSpan(theirs));
  a.AverageAsInitiator(sent, theirs);
  const std::vector<float> ra = Values(a), rb = Values(b);
  for (int i = 0; i < n; ++i) {
    const double average = (static_cast<double>(va[i]) + vb[i]) / 2;
    EXPECT_NEAR(rb[i], average, 1e-5) << i;
    // a = average + its own step, which the exchange did not overwrite.
    EXPECT_NEAR(ra[i], average - 0.1 * g[i], 1e-5) << i;
    // Sum before (after the step) equals sum after.
    EXPECT_NEAR(static_cast<double>(ra[i]) + rb[i],
                static_cast<double>(va[i]) - 0.1 * g[i] + vb[i], 1e-5)
        << i;
  }
}

TEST(PeerModelTest, GradientStepAndAssign) {
  PeerModel m({1.0f, 2.0f, -3.0f});
  m.ApplyGradient(std::vector<float>{1.0f, -2.0f, 4.0f}, 0.5f, 0.25f);
  EXPECT_EQ(Values(m), (std::vector<float>{0.875f, 2.25f, -3.5f}));
  m.Assign(std::vector<float>{7, 8, 9});
  EXPECT_EQ(Values(m), (std::vector<float>{7, 8, 9}));
}

}  // namespace
}  // namespace asgd
