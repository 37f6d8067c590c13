// EncodeTopKPlan against EncodeTopK chunk by chunk, TopKChunkBytes against
// the encoder's bytes, and the plan's validation.
#include "compression/top_k_plan.h"

#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "compression/grad_codec.h"
#include "gtest/gtest.h"

namespace asgd {
namespace {

// The (index, value) entries of a top-k chunk's bytes.
void EntriesOf(const std::string& bytes, std::vector<uint32_t>* indices,
               std::vector<float>* values) {
  CodecLimits limits;
  limits.max_elements = kGradCodecMaxElements;
  absl::StatusOr<CompressedChunk> chunk = ParseCompressedChunk(bytes, limits);
  ASSERT_TRUE(chunk.ok()) << chunk.status();
  TopKReader reader(*chunk);
  int64_t index;
  float value;
  indices->clear();
  values->clear();
  while (reader.Next(&index, &value)) {
    indices->push_back(static_cast<uint32_t>(index));
    values->push_back(value);
  }
}

TEST(TopKPlanTest, EncodesEveryChunkAsEncodeTopKDoes) {
  std::mt19937 rng(5);
  std::normal_distribution<float> normal;
  const int64_t n = 3000;
  std::vector<float> sum(n), residual(n);
  for (float& v : sum) v = normal(rng);
  for (float& v : residual) v = 0.1f * normal(rng);
  // Ties at the threshold: a run of equal values in the last chunk.
  for (int64_t i = 2600; i < 2700; ++i) sum[i] = residual[i] = 0.0f;
  // Chunks with gaps between them; k from none to all.
  TopKPlan plan;
  plan.chunks = {{0, 1000, 10},
                 {1000, 1, 1},
                 {1010, 500, 0},
                 {1600, 700, 700},
                 {2400, 600, 450}};
  EXPECT_EQ(plan.total_k(), 1161);
  EXPECT_EQ(plan.max_count(), 1000);
  const float scale = 1.0f / 3;
  std::vector<float> got_residual = residual;
  std::vector<std::string> out;
  ASSERT_TRUE(
      EncodeTopKPlan(plan, sum, scale, absl::MakeSpan(got_residual), &out)
          .ok());
  ASSERT_EQ(out.size(), plan.chunks.size());
  std::vector<float> want_residual = residual;
  for (size_t c = 0; c < plan.chunks.size(); ++c) {
    const TopKChunkPlan& p = plan.chunks[c];
    std::vector<float> average(p.count);
    for (int64_t i = 0; i < p.count; ++i) {
      average[i] = sum[p.flat_begin + i] * scale;
    }
    std::string bytes;
    ASSERT_TRUE(
        EncodeTopK(average, p.k,
                   absl::MakeSpan(want_residual).subspan(p.flat_begin, p.count),
                   &bytes)
            .ok());
    EXPECT_EQ(out[c], bytes) << "chunk " << c;
  }
  EXPECT_EQ(got_residual, want_residual);
  EXPECT_EQ(got_residual[1005], residual[1005]);  // in no chunk
}

TEST(TopKPlanTest, ANonFiniteValueWritesNothing) {
  const int64_t n = 64;
  std::vector<float> sum(n, 1.0f), residual(n, 0.5f);
  sum[40] = std::numeric_limits<float>::quiet_NaN();
  TopKPlan plan;
  plan.chunks = {{0, 32, 4}, {32, 32, 4}};
  std::vector<std::string> out = {"x"};
  const std::vector<float> before = residual;
  EXPECT_EQ(
      EncodeTopKPlan(plan, sum, 1.0f, absl::MakeSpan(residual), &out).code(),
      absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(residual, before);
  EXPECT_EQ(out, std::vector<std::string>{"x"});
}

TEST(TopKPlanTest, RefusesPlansThatDoNotFit) {
  const int64_t n = 100;
  TopKPlan good;
  good.chunks = {{0, 50, 50}, {50, 50, 0}};
  EXPECT_TRUE(good.Validate(n).ok());
  const std::vector<std::vector<TopKChunkPlan>> bad = {
      {{90, 20, 1}},              // past the end
      {{-1, 5, 1}},               // before the start
      {{0, 0, 0}},                // empty
      {{0, 10, 11}},              // k > count
      {{0, 10, -1}},              // negative k
      {{0, 10, 1}, {5, 10, 1}},   // overlapping
      {{50, 10, 1}, {0, 10, 1}},  // out of order
  };
  for (const auto& chunks : bad) {
    TopKPlan plan;
    plan.chunks = chunks;
    EXPECT_EQ(plan.Validate(n).code(), absl::StatusCode::kInvalidArgument)
        << chunks[0].flat_begin << " " << chunks[0].count;
    std::vector<float> sum(n, 1.0f), residual(n, 0.0f);
    std::vector<std::string> out;
    EXPECT_EQ(
        EncodeTopKPlan(plan, sum, 1.0f, absl::MakeSpan(residual), &out).code(),
        absl::StatusCode::kInvalidArgument);
  }
  std::vector<float> sum(n), residual(n + 1);
  std::vector<std::string> out;
  EXPECT_EQ(
      EncodeTopKPlan(good, sum, 1.0f, absl::MakeSpan(residual), &out).code(),
      absl::StatusCode::kInvalidArgument);
}

TEST(TopKPlanTest, ChunkBytesFromTheEntriesAreTheEncodersBytes) {
  std::mt19937 rng(7);
  std::normal_distribution<float> normal;
  // Gaps up to 2^21 (varints of 1 to 4 bytes), k = 0 and k = count.
  for (const auto& [count, k] : std::vector<std::pair<int64_t, int64_t>>{
           {1, 1}, {300, 0}, {300, 300}, {5000, 37}, {1 << 22, 3}}) {
    std::vector<float> gradient(count), residual(count, 0.0f);
    for (float& v : gradient) v = normal(rng);
    std::string want;
    ASSERT_TRUE(EncodeTopK(gradient, k, absl::MakeSpan(residual), &want).ok());
    std::vector<uint32_t> indices;
    std::vector<float> values;
    EntriesOf(want, &indices, &values);
    ASSERT_EQ(static_cast<int64_t>(indices.size()), k);
    std::string got;
    ASSERT_TRUE(TopKChunkBytes(count, indices, values, &got).ok());
    EXPECT_EQ(got, want) << count << " " << k;
  }
}

TEST(TopKPlanTest, ChunkBytesRefuseEntriesThatCannotBe) {
  std::string out = "kept";
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> v2 = {1.0f, 2.0f};
  EXPECT_EQ(TopKChunkBytes(10, std::vector<uint32_t>{3, 3}, v2, &out).code(),
            absl::StatusCode::kInvalidArgument);  // not increasing
  EXPECT_EQ(TopKChunkBytes(10, std::vector<uint32_t>{4, 2}, v2, &out).code(),
            absl::StatusCode::kInvalidArgument);  // out of order
  EXPECT_EQ(TopKChunkBytes(10, std::vector<uint32_t>{3, 10}, v2, &out).code(),
            absl::StatusCode::kInvalidArgument);  // past the chunk
  EXPECT_EQ(TopKChunkBytes(10, std::vector<uint32_t>{3, 4},
                           std::vector<float>{1.0f, inf}, &out)
                .code(),
            absl::StatusCode::kInvalidArgument);  // not finite
  EXPECT_EQ(TopKChunkBytes(10, std::vector<uint32_t>{3},
                           std::vector<float>{1.0f, 2.0f}, &out)
                .code(),
            absl::StatusCode::kInvalidArgument);  // sizes disagree
  EXPECT_EQ(TopKChunkBytes(0, {}, {}, &out).code(),
            absl::StatusCode::kInvalidArgument);  // no elements
  EXPECT_EQ(out, "kept");
}

}  // namespace
}  // namespace asgd
