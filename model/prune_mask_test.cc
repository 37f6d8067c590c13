#include "model/prune_mask.h"

#include <vector>

#include "gtest/gtest.h"

namespace asgd {
namespace {

ModelSpec Dnn() {
  ModelSpec spec;
  spec.feature_dim = 3;
  spec.context = 0;
  spec.layers = {LayerSpec::Dense(2, Activation::kRelu)};
  spec.num_classes = 2;
  return spec;  // layer0/weight [2,3], layer0/bias [2], layer1/weight [2,2], layer1/bias [2]
}

TEST(PruneMaskTest, TheZerosOfPrunedTensorsArePruned) {
  const ModelSpec spec = Dnn();
  //                        layer0/weight           bias     layer1/weight  bias
  std::vector<float> params = {0, 1, 0, 2, 0, 3,    0, 0,    0, 4, 5, 0,    0, 1};
  const std::vector<std::string> pruned = {"layer1/weight"};
  ASSERT_TRUE(CheckPrunedTensors(spec, pruned).ok());
  const std::vector<uint8_t> keep = KeepMask(spec, params, pruned);
  const std::vector<uint8_t> want = {1, 1, 1, 1, 1, 1, 1, 1, 0, 1, 1, 0, 1, 1};
  EXPECT_EQ(keep, want);
  EXPECT_EQ(CountPruned(keep), 2);
  EXPECT_EQ(KeepMask(spec, params, {}), std::vector<uint8_t>(14, 1));
  EXPECT_EQ(CountPruned(KeepMask(spec, params, {"layer0/weight", "layer1/weight"})),
            5);
}

TEST(PruneMaskTest, DigestsTellMasksApart) {
  const std::vector<uint8_t> a = {1, 0, 1, 1};
  const std::vector<uint8_t> b = {1, 1, 0, 1};
  EXPECT_EQ(KeepMaskDigest(a), KeepMaskDigest(a));
  EXPECT_NE(KeepMaskDigest(a), KeepMaskDigest(b));
  EXPECT_EQ(KeepMaskDigest(a).size(), 16u);
  EXPECT_EQ(ModelIdWithMask("spec", ""), "spec");
  EXPECT_NE(ModelIdWithMask("spec", KeepMaskDigest(a)),
            ModelIdWithMask("spec", KeepMaskDigest(b)));
}

TEST(PruneMaskTest, AttributesCarryTheNames) {
  const std::vector<std::string> names = {"layer0/weight", "layer1/weight"};
  const std::map<std::string, std::string> attributes = {
      {kPrunedTensorsAttribute, JoinPrunedTensors(names)}, {"x", "y"}};
  EXPECT_EQ(PrunedTensorsOf(attributes), names);
  EXPECT_TRUE(PrunedTensorsOf({{"x", "y"}}).empty());
}

TEST(PruneMaskTest, RefusesUnknownAndRepeatedNames) {
  const ModelSpec spec = Dnn();
  EXPECT_EQ(CheckPrunedTensors(spec, {"layer2/weight"}).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CheckPrunedTensors(spec, {"layer0/bias", "layer0/bias"}).code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace asgd
