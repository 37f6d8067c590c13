#include "worker/pipeline/stage_plan.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "absl/strings/match.h"
#include "gtest/gtest.h"

namespace asgd {
namespace {

// `hidden` dense layers of the given widths on 10 inputs, `classes` outputs.
ModelSpec Dense(const std::vector<int>& hidden, int classes) {
  ModelSpec spec;
  spec.feature_dim = 10;
  spec.context = 0;
  spec.num_classes = classes;
  for (int units : hidden) {
    spec.layers.push_back(LayerSpec::Dense(units, Activation::kRelu));
  }
  return spec;
}

int64_t WorstMacs(const ModelSpec& spec, const StagePlan& plan, int rows) {
  int64_t worst = 0;
  for (int s = 0; s < plan.stages(); ++s) {
    worst = std::max(worst, CostOfStage(spec, plan, s, rows).macs);
  }
  return worst;
}

TEST(StagePlanTest, ParsesExplicitStagesAndTheirDelays) {
  const ModelSpec spec = Dense({10, 10, 10}, 5);  // layers 0..3
  auto plan = ParseStagePlan(spec, "0-1,2,3");
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->bounds, (std::vector<int>{0, 2, 3, 4}));
  EXPECT_EQ(plan->stages(), 3);
  EXPECT_EQ(plan->Delay(0), 2);
  EXPECT_EQ(plan->Delay(1), 1);
  EXPECT_EQ(plan->Delay(2), 0);
  EXPECT_EQ(ParseStagePlan(spec, "0-3")->bounds, (std::vector<int>{0, 4}));
  for (const char* bad : {"0-1,3", "1-3", "0-2,2-3", "0-4", "0-2", "a",
                          "0-1-2", "", "0,1,2,3,4", "2-1,2-3"}) {
    EXPECT_EQ(ParseStagePlan(spec, bad).status().code(),
              absl::StatusCode::kInvalidArgument)
        << bad;
  }
}

TEST(StagePlanTest, CostsAreTheLayersTrainingWorkAndParameters) {
  const ModelSpec spec = Dense({20, 30}, 5);
  const StagePlan plan{{0, 2, 3}};
  // Weights 10x20 and 20x30 (3 multiply-adds each per row: forward and
  // backward), biases not multiplied.
  EXPECT_EQ(CostOfStage(spec, plan, 0, 4).macs, 3 * (200 + 600) * 4);
  EXPECT_EQ(CostOfStage(spec, plan, 0, 4).param_bytes,
            4 * (200 + 20 + 600 + 30));
  EXPECT_EQ(CostOfStage(spec, plan, 1, 1).macs, 3 * 150);
}

TEST(StagePlanTest, AHeavyOutputLayerGetsAStageOfItsOwn) {
  const ModelSpec spec = Dense({10, 10, 10}, 100);  // output 10x100
  for (int stages : {2, 3}) {
    auto plan = BalanceStages(spec, stages, 256);
    ASSERT_TRUE(plan.ok());
    ASSERT_EQ(plan->stages(), stages);
    EXPECT_EQ(plan->bounds[stages - 1], 3) << stages;  // output alone
    EXPECT_EQ(plan->bounds.front(), 0);
    EXPECT_EQ(plan->bounds.back(), 4);
  }
  // Equal layers split evenly.
  EXPECT_EQ(BalanceStages(Dense({10, 10, 10}, 10), 2, 8)->bounds,
            (std::vector<int>{0, 2, 4}));
}

TEST(StagePlanTest, BalancedIsTheBestOfEveryCut) {
  std::mt19937 rng(5);
  std::uniform_int_distribution<int> width(1, 60);
  for (int trial = 0; trial < 40; ++trial) {
    std::vector<int> hidden(1 + trial % 5);
    for (int& w : hidden) w = width(rng);
    const ModelSpec spec = Dense(hidden, width(rng));
    const int n = static_cast<int>(hidden.size()) + 1;
    for (int stages = 1; stages <= n; ++stages) {
      auto plan = BalanceStages(spec, stages, 3);
      ASSERT_TRUE(plan.ok());
      ASSERT_EQ(plan->stages(), stages);
      // Brute force over every cut into `stages` stages.
      int64_t best = std::numeric_limits<int64_t>::max();
      for (int mask = 0; mask < (1 << (n - 1)); ++mask) {
        if (__builtin_popcount(mask) != stages - 1) continue;
        StagePlan cut{{0}};
        for (int i = 1; i < n; ++i) {
          if (mask & (1 << (i - 1))) cut.bounds.push_back(i);
        }
        cut.bounds.push_back(n);
        best = std::min(best, WorstMacs(spec, cut, 3));
      }
      EXPECT_EQ(WorstMacs(spec, *plan, 3), best) << trial << " " << stages;
    }
  }
}

TEST(StagePlanTest, RefusesImpossiblePlansAndDescribesStages) {
  const ModelSpec spec = Dense({10, 10}, 5);
  EXPECT_EQ(BalanceStages(spec, 0, 8).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(BalanceStages(spec, 4, 8).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(BalanceStages(spec, 2, 0).status().code(),
            absl::StatusCode::kInvalidArgument);
  const std::string text = DescribeStagePlan(spec, StagePlan{{0, 2, 3}}, 8);
  EXPECT_TRUE(absl::StrContains(text, "stage 0: layers 0-1, ")) << text;
  EXPECT_TRUE(absl::StrContains(text, "delay 1\n")) << text;
  EXPECT_TRUE(absl::StrContains(text, "stage 1: layer 2, ")) << text;
  EXPECT_TRUE(absl::StrContains(text, "delay 0\n")) << text;
}

}  // namespace
}  // namespace asgd
