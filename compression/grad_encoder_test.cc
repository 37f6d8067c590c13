#include "compression/grad_encoder.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "common/chunking.h"
#include "model/model_spec.h"
#include "common/model_layout.h"
#include "compression/grad_codec.h"
#include "gtest/gtest.h"

namespace asgd {
namespace {

// A small DNN (rows of 13, 17 and 11 elements; biases of 17, 17 and 5) on
// 3 servers x 2 shards, with chunks of at most 50 elements: chunks start and
// end inside rows.
ModelLayout SmallLayout() {
  ModelSpec spec;
  spec.feature_dim = 13;
  spec.context = 0;
  spec.layers = {LayerSpec::Dense(17, Activation::kRelu),
                 LayerSpec::Dense(11, Activation::kRelu)};
  spec.num_classes = 5;
  auto layout = ModelLayout::Create(ModelTensors(spec), 3, 2);
  EXPECT_TRUE(layout.ok());
  return *layout;
}

TEST(GradEncoderTest, OneBitGroupsAreTensorRows) {
  const ModelLayout layout = SmallLayout();
  for (int server = 0; server < 3; ++server) {
    const FlatRange range = layout.ServerRange(server);
    auto encoder = GradEncoder::Create(layout, range, {});
    ASSERT_TRUE(encoder.ok()) << encoder.status();
    std::mt19937 rng(server);
    std::normal_distribution<float> dist;
    std::vector<float> grad(range.size());
    for (float& x : grad) x = dist(rng);
    for (const ChunkRef& c : PlanChunks(layout, range, 50)) {
      std::string bytes;
      ASSERT_TRUE(encoder
                      ->EncodeChunk(
                          c, grad.data() + (c.flat_begin - range.begin), &bytes)
                      .ok());
      auto chunk = ParseCompressedChunk(bytes, {});
      ASSERT_TRUE(chunk.ok()) << chunk.status();
      const std::vector<int64_t>& shape = layout.tensors()[c.tensor].shape;
      EXPECT_EQ(chunk->group_size, shape.back());
      // Two elements share a group exactly when they share a row.
      for (int64_t i = 0; i < c.count; ++i) {
        for (int64_t j = i; j < c.count; ++j) {
          const bool same_row =
              (c.offset + i) / shape.back() == (c.offset + j) / shape.back();
          ASSERT_EQ(OneBitGroupOf(*chunk, i) == OneBitGroupOf(*chunk, j),
                    same_row)
              << "tensor " << c.tensor << " offset " << c.offset << " i " << i
              << " j " << j;
        }
      }
    }
  }
}

TEST(GradEncoderTest, LargeLastDimensionIsCapped) {
  auto layout = ModelLayout::Create({{"w", {3, 10000}}}, 1, 1);
  ASSERT_TRUE(layout.ok());
  GradEncoderOptions options;
  options.max_group_size = 4096;
  auto encoder = GradEncoder::Create(*layout, layout->ServerRange(0), options);
  ASSERT_TRUE(encoder.ok());
  const OneBitGroups groups = encoder->GroupsOf({0, 5000, 5000, 4000});
  EXPECT_EQ(groups.group_size, 4096);
  EXPECT_EQ(groups.first_group, 4096 - 5000 % 4096);
}

// Over many pushes of the whole range, per chunk: the decoded gradients sum
// to the true gradients minus the encoder's residual.
class GradEncoderFeedbackTest : public ::testing::TestWithParam<GradEncoding> {
};

TEST_P(GradEncoderFeedbackTest, ResidualClosesTheGap) {
  const ModelLayout layout = SmallLayout();
  const FlatRange range = layout.ServerRange(1);
  GradEncoderOptions options;
  options.encoding = GetParam();
  options.top_k_fraction = 0.1;
  auto encoder = GradEncoder::Create(layout, range, options);
  ASSERT_TRUE(encoder.ok());
  const std::vector<ChunkRef> plan = PlanChunks(layout, range, 50);
  std::mt19937 rng(5);
  std::normal_distribution<float> dist(0.1f, 1.0f);
  std::vector<double> true_sum(range.size(), 0), decoded_sum(range.size(), 0);
  EXPECT_TRUE(encoder->residual().empty());  // no memory until first used
  for (int step = 0; step < 100; ++step) {
    std::vector<float> grad(range.size());
    for (float& x : grad) x = dist(rng);
    for (const ChunkRef& c : plan) {
      const int64_t local = c.flat_begin - range.begin;
      std::string bytes;
      ASSERT_TRUE(encoder->EncodeChunk(c, grad.data() + local, &bytes).ok());
      auto chunk = ParseCompressedChunk(bytes, {});
      ASSERT_TRUE(chunk.ok());
      if (GetParam() == GradEncoding::kTopK) {
        ASSERT_EQ(chunk->k, static_cast<int64_t>(std::ceil(0.1 * c.count)));
      }
      std::vector<float> decoded(c.count);
      DecodeCompressed(*chunk, 0, c.count, decoded.data());
      for (int64_t i = 0; i < c.count; ++i) {
        true_sum[local + i] += grad[local + i];
        decoded_sum[local + i] += decoded[i];
      }
    }
  }
  ASSERT_EQ(static_cast<int64_t>(encoder->residual().size()), range.size());
  for (int64_t i = 0; i < range.size(); ++i) {
    ASSERT_NEAR(true_sum[i] - decoded_sum[i], encoder->residual()[i], 1e-3)
        << i;
  }
  encoder->ResetResidual();
  for (float r : encoder->residual()) ASSERT_EQ(r, 0.0f);
}

// A push that is not applied goes back into the residual: encoding, then
// restoring, leaves the residual holding gradient + old residual.
TEST_P(GradEncoderFeedbackTest, RestoreReturnsWhatWasSent) {
  const ModelLayout layout = SmallLayout();
  const FlatRange range = layout.ServerRange(0);
  GradEncoderOptions options;
  options.encoding = GetParam();
  options.top_k_fraction = 0.2;
  auto encoder = GradEncoder::Create(layout, range, options);
  ASSERT_TRUE(encoder.ok());
  const std::vector<ChunkRef> plan = PlanChunks(layout, range, 50);
  std::mt19937 rng(8);
  std::normal_distribution<float> dist;
  std::vector<float> grad(range.size());
  for (float& x : grad) x = dist(rng);
  std::vector<std::string> sent(plan.size());
  for (size_t c = 0; c < plan.size(); ++c) {  // a first push, applied
    ASSERT_TRUE(encoder
                    ->EncodeChunk(
                        plan[c], grad.data() + plan[c].flat_begin - range.begin,
                        &sent[c])
                    .ok());
  }
  const std::vector<float> before(encoder->residual().begin(),
                                  encoder->residual().end());
  for (float& x : grad) x = dist(rng);
  for (size_t c = 0; c < plan.size(); ++c) {  // a second one, dropped
    const float* g = grad.data() + plan[c].flat_begin - range.begin;
    ASSERT_TRUE(encoder->EncodeChunk(plan[c], g, &sent[c]).ok());
    ASSERT_TRUE(encoder->Restore(plan[c], sent[c]).ok());
  }
  for (int64_t i = 0; i < range.size(); ++i) {
    ASSERT_NEAR(encoder->residual()[i], before[i] + grad[i],
                1e-6 * (1 + std::fabs(before[i] + grad[i])))
        << i;
  }
  // Bytes of another chunk, or garbage, are refused and change nothing.
  const std::vector<float> now(encoder->residual().begin(),
                               encoder->residual().end());
  size_t other = 1;
  while (other < plan.size() && plan[other].count == plan[0].count) ++other;
  ASSERT_LT(other, plan.size());
  EXPECT_EQ(encoder->Restore(plan[0], sent[other]).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(encoder->Restore(plan[0], "garbage").code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(std::equal(now.begin(), now.end(), encoder->residual().begin()));
}

INSTANTIATE_TEST_SUITE_P(Encodings, GradEncoderFeedbackTest,
                         ::testing::Values(GradEncoding::kOneBit,
                                           GradEncoding::kTopK),
                         [](const auto& info) {
                           return std::string(GradEncodingName(info.param));
                         });

TEST(GradEncoderTest, RefusesBadOptionsAndChunks) {
  const ModelLayout layout = SmallLayout();
  const FlatRange range = layout.ServerRange(1);
  GradEncoderOptions top_k;
  top_k.encoding = GradEncoding::kTopK;
  top_k.top_k_fraction = 0.0;
  EXPECT_FALSE(GradEncoder::Create(layout, range, top_k).ok());
  top_k.top_k_fraction = 1.5;
  EXPECT_FALSE(GradEncoder::Create(layout, range, top_k).ok());
  GradEncoderOptions groups;
  groups.max_group_size = 0;
  EXPECT_FALSE(GradEncoder::Create(layout, range, groups).ok());
  EXPECT_FALSE(
      GradEncoder::Create(layout, {0, layout.total_size() + 1}, {}).ok());

  auto encoder = GradEncoder::Create(layout, range, {});
  ASSERT_TRUE(encoder.ok());
  std::vector<float> grad(layout.total_size(), 1.0f);
  std::string bytes = "untouched";
  // Outside the range (server 0's first chunk), a flat offset that does not
  // match the tensor offset, past the tensor's end.
  const ChunkRef outside = PlanChunks(layout, layout.ServerRange(0), 50)[0];
  ChunkRef inside = PlanChunks(layout, range, 50)[0];
  ChunkRef shifted = inside;
  shifted.flat_begin += 1;
  ChunkRef too_long = inside;
  too_long.count = layout.tensor_size(inside.tensor) - inside.offset + 1;
  for (const ChunkRef& c : {outside, shifted, too_long}) {
    EXPECT_EQ(encoder->EncodeChunk(c, grad.data(), &bytes).code(),
              absl::StatusCode::kInvalidArgument);
  }
  EXPECT_EQ(bytes, "untouched");
  for (float r : encoder->residual()) ASSERT_EQ(r, 0.0f);
}

}  // namespace
}  // namespace asgd
