#include "common/model_layout.h"

#include "gtest/gtest.h"

namespace asgd {
namespace {

// A DNN's tensors: 440 inputs, hidden 64 and 32, 40 classes.
std::vector<TensorSpec> Tensors() {
  return {{"layer0/weight", {64, 440}}, {"layer0/bias", {64}},
          {"layer1/weight", {32, 64}},  {"layer1/bias", {32}},
          {"layer2/weight", {40, 32}},  {"layer2/bias", {40}}};
}

TEST(ModelLayoutTest, ShardsTileTheFlatVectorExactly) {
  for (int servers : {1, 2, 3}) {
    for (int shards : {1, 2, 4}) {
      auto layout = ModelLayout::Create(Tensors(), servers, shards);
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

TEST(ModelLayoutTest, RejectsBadSpecs) {
  EXPECT_FALSE(ModelLayout::Create({}, 1, 1).ok());
  EXPECT_FALSE(ModelLayout::Create({{"a", {2}}, {"a", {3}}}, 1, 1).ok());
  EXPECT_FALSE(ModelLayout::Create({{"a", {0}}}, 1, 1).ok());
  EXPECT_FALSE(ModelLayout::Create({{"a", {4}}}, 0, 1).ok());
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
