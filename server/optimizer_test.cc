#include "server/optimizer.h"

#include <cmath>
#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace asgd {
namespace {

// Reference: the textbook update in double precision, element by element.
void ReferenceStep(std::vector<double>& w, std::vector<double>& v,
                   const std::vector<float>& g, double lr, double mu) {
  for (size_t i = 0; i < w.size(); ++i) {
    if (mu > 0) {
      v[i] = mu * v[i] + g[i];
      w[i] -= lr * v[i];
    } else {
      w[i] -= lr * g[i];
    }
  }
}

class OptimizerTest : public ::testing::TestWithParam<float> {};

TEST_P(OptimizerTest, MatchesReferenceOverManySteps) {
  const float momentum = GetParam();
  auto opt = Optimizer::Create({0.05f, momentum});
  ASSERT_TRUE(opt.ok());
  EXPECT_EQ(opt->has_state(), momentum > 0);
  const int n = 1037;  // not a multiple of the vector width
  std::mt19937 rng(3);
  std::normal_distribution<float> dist;
  std::vector<float> w(n), v(n, 0.0f);
  std::vector<double> rw(n), rv(n, 0.0);
  for (int i = 0; i < n; ++i) rw[i] = w[i] = dist(rng);
  for (int step = 0; step < 20; ++step) {
    std::vector<float> g(n);
    for (float& x : g) x = dist(rng);
    opt->Apply(w.data(), v.data(), g.data(), n, 1.0f);
    ReferenceStep(rw, rv, g, 0.05, momentum);
  }
  for (int i = 0; i < n; ++i) {
    ASSERT_NEAR(w[i], rw[i], 1e-5 * (1 + std::abs(rw[i]))) << i;
  }
}

INSTANTIATE_TEST_SUITE_P(SgdAndMomentum, OptimizerTest,
                         ::testing::Values(0.0f, 0.9f));

TEST(OptimizerTest, ScaleMultipliesTheLearningRate) {
  auto opt = Optimizer::Create({0.5f, 0.0f});
  ASSERT_TRUE(opt.ok());
  std::vector<float> w = {1.0f, 2.0f}, g = {1.0f, -1.0f};
  opt->Apply(w.data(), nullptr, g.data(), 2, 0.5f);
  EXPECT_FLOAT_EQ(w[0], 0.75f);
  EXPECT_FLOAT_EQ(w[1], 2.25f);
}

TEST(OptimizerTest, RejectsBadSettings) {
  EXPECT_FALSE(Optimizer::Create({0.0f, 0.0f}).ok());
  EXPECT_FALSE(Optimizer::Create({-1.0f, 0.0f}).ok());
  EXPECT_FALSE(Optimizer::Create({NAN, 0.0f}).ok());
  EXPECT_FALSE(Optimizer::Create({0.1f, 1.0f}).ok());
  EXPECT_FALSE(Optimizer::Create({0.1f, -0.1f}).ok());
}

}  // namespace
}  // namespace asgd
