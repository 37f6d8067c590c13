#include "common/model_layout.h"

#include "common/dnn_spec.h"
#include "gtest/gtest.h"

namespace asgd {
namespace {

TEST(ModelLayoutTest, ShardsTileTheFlatVectorExactly) {
  DnnSpec spec;
  spec.hidden = {64, 32};
  spec.num_classes = 40;
  for (int servers : {1, 2, 3}) {
    for (int shards : {1, 2, 4}) {
      auto layout = ModelLayout::Create(DnnTensors(spec), servers, shards);
      ASSERT_TRUE(layout.ok()) << layout.status();
      int64_t expect = 0;
      for (int s = 0; s < servers; ++s) {
        EXPECT_EQ(layout->ServerRange(s).begin, expect);
        for (int k = 0; k < shards; ++k) {
          FlatRange r = layout->ShardRange(s, k);
          EXPECT_EQ(r.begin, expect);
          EXPECT_GT(r.size(), 0);
          if (r.end != layout->total_size()) {
            EXPECT_EQ(r.end % ModelLayout::kShardAlignment, 0);
          }
          expect = r.end;
        }
        EXPECT_EQ(layout->ServerRange(s).end, expect);
      }
      EXPECT_EQ(expect, layout->total_size());
      // Slices of the whole model cover every tensor once.
      auto slices = layout->SlicesOf({0, layout->total_size()});
      ASSERT_EQ(slices.size(), layout->tensors().size());
      for (size_t t = 0; t < slices.size(); ++t) {
        EXPECT_EQ(slices[t].size(), layout->tensor_size(t));
      }
    }
  }
}

TEST(ModelLayoutTest, DnnTensorsHaveExpectedShapes) {
  DnnSpec spec;
  spec.input_dim = 440;
  spec.hidden = {256};
  spec.num_classes = 40;
  auto layout = ModelLayout::Create(DnnTensors(spec), 1, 1);
  ASSERT_TRUE(layout.ok());
  ASSERT_EQ(layout->tensors().size(), 4u);
  EXPECT_EQ(layout->tensors()[0].name, "layer0/weight");
  EXPECT_EQ(layout->tensor_size(0), 256 * 440);
  EXPECT_EQ(layout->tensors()[3].name, "layer1/bias");
  EXPECT_EQ(layout->total_size(), 256 * 440 + 256 + 40 * 256 + 40);
  EXPECT_EQ(InitialDnnParams(spec, 7).size(), layout->total_size());
  EXPECT_EQ(InitialDnnParams(spec, 7), InitialDnnParams(spec, 7));
  EXPECT_NE(InitialDnnParams(spec, 7), InitialDnnParams(spec, 8));
}

TEST(ModelLayoutTest, RejectsBadSpecs) {
  EXPECT_FALSE(ModelLayout::Create({}, 1, 1).ok());
  EXPECT_FALSE(ModelLayout::Create({{"a", {2}}, {"a", {3}}}, 1, 1).ok());
  EXPECT_FALSE(ModelLayout::Create({{"a", {0}}}, 1, 1).ok());
  EXPECT_FALSE(ModelLayout::Create({{"a", {4}}}, 0, 1).ok());
  EXPECT_FALSE(ParseLayerSizes("512,x").ok());
  EXPECT_FALSE(ParseLayerSizes("512,-1").ok());
  EXPECT_EQ(*ParseLayerSizes("512, 256"), (std::vector<int>{512, 256}));
  EXPECT_TRUE(ParseLayerSizes("")->empty());
}

TEST(ModelLayoutTest, FingerprintDependsOnShapeAndPool) {
  auto a = ModelLayout::Create({{"w", {4, 4}}}, 2, 2);
  auto b = ModelLayout::Create({{"w", {4, 4}}}, 2, 2);
  auto c = ModelLayout::Create({{"w", {4, 5}}}, 2, 2);
  auto d = ModelLayout::Create({{"w", {4, 4}}}, 1, 2);
  EXPECT_EQ(a->Fingerprint(), b->Fingerprint());
  EXPECT_NE(a->Fingerprint(), c->Fingerprint());
  EXPECT_NE(a->Fingerprint(), d->Fingerprint());
}

}  // namespace
}  // namespace asgd
