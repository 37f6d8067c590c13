#include "step/optimizer.h"

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
    opt->Apply(w.data(), v.data(), g.data(), n, {});
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
  opt->Apply(w.data(), nullptr, g.data(), 2, {0.5f, 0, nullptr});
  EXPECT_FLOAT_EQ(w[0], 0.75f);
  EXPECT_FLOAT_EQ(w[1], 2.25f);
}

TEST(OptimizerTest, RejectsBadSettings) {
  EXPECT_FALSE(Optimizer::Create({0.0f, 0.0f}).ok());
  EXPECT_FALSE(Optimizer::Create({-1.0f, 0.0f}).ok());
  EXPECT_FALSE(Optimizer::Create({NAN, 0.0f}).ok());
  EXPECT_FALSE(Optimizer::Create({0.1f, 1.0f}).ok());
  EXPECT_FALSE(Optimizer::Create({0.1f, -0.1f}).ok());
  OptimizerOptions nesterov_without_momentum;
  nesterov_without_momentum.nesterov = true;
  EXPECT_FALSE(Optimizer::Create(nesterov_without_momentum).ok());
  OptimizerOptions bad_schedule;
  bad_schedule.schedule = LrSchedule::kStep;
  bad_schedule.gamma = 1.5f;
  EXPECT_FALSE(Optimizer::Create(bad_schedule).ok());
  EXPECT_FALSE(ParseLrSchedule("cosine").ok());
}

// Reference of the full update rule in double (see optimizer.h).
struct Reference {
  OptimizerOptions o;
  std::vector<double> w, v;
  void Step(const std::vector<float>& g_in, const std::vector<double>& backup,
            uint64_t step, double scale) {
    double lr = o.learning_rate;
    if (o.schedule == LrSchedule::kStep) {
      lr *= std::pow(o.gamma, double(step / o.step_size));
    } else if (o.schedule == LrSchedule::kExponential) {
      lr *= std::pow(o.gamma, double(step) / o.step_size);
    }
    lr *= scale;
    for (size_t i = 0; i < w.size(); ++i) {
      double g = g_in[i];
      if (!backup.empty()) g += o.dc_lambda * g * g * (w[i] - backup[i]);
      g += o.weight_decay * w[i];
      if (o.momentum == 0) {
        w[i] -= lr * g;
      } else {
        v[i] = o.momentum * v[i] + g;
        w[i] -= lr * (o.nesterov ? g + o.momentum * v[i] : v[i]);
      }
    }
  }
};

TEST(OptimizerTest, NesterovDecayScheduleAndDelayCompensationMatchReference) {
  std::vector<OptimizerOptions> variants;
  OptimizerOptions base;
  base.learning_rate = 0.05f;
  base.momentum = 0.9f;
  base.nesterov = true;
  variants.push_back(base);                    // Nesterov
  base.nesterov = false;
  base.weight_decay = 0.01f;
  variants.push_back(base);                    // momentum + decay
  base.momentum = 0.0f;
  base.schedule = LrSchedule::kStep;
  base.step_size = 3;
  base.gamma = 0.5f;
  variants.push_back(base);                    // SGD + decay + step schedule
  base.schedule = LrSchedule::kExponential;
  base.dc_lambda = 0.5f;
  variants.push_back(base);                    // + exponential + DC-ASGD
  base.momentum = 0.5f;
  base.nesterov = true;
  variants.push_back(base);                    // everything at once
  const int n = 301;
  for (size_t k = 0; k < variants.size(); ++k) {
    auto opt = Optimizer::Create(variants[k]);
    ASSERT_TRUE(opt.ok()) << opt.status();
    std::mt19937 rng(k);
    std::normal_distribution<float> dist;
    std::vector<float> w(n), v(n, 0.0f);
    Reference ref{variants[k], std::vector<double>(n), std::vector<double>(n, 0)};
    for (int i = 0; i < n; ++i) ref.w[i] = w[i] = dist(rng);
    for (uint64_t step = 0; step < 10; ++step) {
      std::vector<float> g(n), backup(n);
      for (float& x : g) x = dist(rng);
      for (int i = 0; i < n; ++i) backup[i] = w[i] + 0.1f * dist(rng);
      const bool dc = opt->needs_backup();
      UpdateContext ctx{0.7f, step, dc ? backup.data() : nullptr};
      ref.Step(g, dc ? std::vector<double>(backup.begin(), backup.end())
                     : std::vector<double>(), step, 0.7);
      opt->Apply(w.data(), v.data(), g.data(), n, ctx);
    }
    for (int i = 0; i < n; ++i) {
      ASSERT_NEAR(w[i], ref.w[i], 1e-4 * (1 + std::abs(ref.w[i])))
          << "variant " << k << " element " << i;
    }
  }
}

TEST(OptimizerTest, SchedulesDecayTheLearningRate) {
  OptimizerOptions o;
  o.learning_rate = 1.0f;
  o.schedule = LrSchedule::kStep;
  o.step_size = 10;
  o.gamma = 0.5f;
  auto step = Optimizer::Create(o);
  ASSERT_TRUE(step.ok());
  EXPECT_FLOAT_EQ(step->LearningRate(0), 1.0f);
  EXPECT_FLOAT_EQ(step->LearningRate(9), 1.0f);
  EXPECT_FLOAT_EQ(step->LearningRate(10), 0.5f);
  EXPECT_FLOAT_EQ(step->LearningRate(25), 0.25f);
  o.schedule = LrSchedule::kExponential;
  auto expo = Optimizer::Create(o);
  ASSERT_TRUE(expo.ok());
  EXPECT_FLOAT_EQ(expo->LearningRate(5), std::pow(0.5f, 0.5f));
}

}  // namespace
}  // namespace asgd
