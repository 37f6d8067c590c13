// EncodeOneBitPlan against EncodeOneBit chunk by chunk, and the plan's
// validation.
#include "compression/one_bit_plan.h"

#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "compression/grad_codec.h"
#include "gtest/gtest.h"

namespace asgd {
namespace {

TEST(OneBitPlanTest, EncodesEveryChunkAsEncodeOneBitDoes) {
  std::mt19937 rng(3);
  std::normal_distribution<float> normal;
  const int64_t n = 500;
  std::vector<float> sum(n), residual(n);
  for (float& v : sum) v = normal(rng);
  for (float& v : residual) v = 0.1f * normal(rng);
  // Chunks with gaps between them; groups of several shapes.
  const OneBitPlan plan = MakeOneBitPlan(
      {{0, 100, 16, 5}, {100, 1, 1, 1}, {110, 200, 64, 64}, {400, 100, 7, 3}});
  const float scale = 1.0f / 3;
  std::vector<float> got_residual = residual;
  std::vector<char> out(plan.total_bytes);
  ASSERT_TRUE(EncodeOneBitPlan(plan, sum, scale, absl::MakeSpan(got_residual),
                               absl::MakeSpan(out))
                  .ok());
  std::vector<float> want_residual = residual;
  for (size_t c = 0; c < plan.chunks.size(); ++c) {
    const OneBitChunkPlan& p = plan.chunks[c];
    std::vector<float> average(p.count);
    for (int64_t i = 0; i < p.count; ++i) {
      average[i] = sum[p.flat_begin + i] * scale;
    }
    std::string bytes;
    ASSERT_TRUE(EncodeOneBit(average, p.group_size, p.first_group,
                             absl::MakeSpan(want_residual)
                                 .subspan(p.flat_begin, p.count),
                             &bytes)
                    .ok());
    EXPECT_EQ(std::string(out.data() + plan.offsets[c], bytes.size()), bytes)
        << "chunk " << c;
  }
  EXPECT_EQ(got_residual, want_residual);
  EXPECT_EQ(got_residual[105], residual[105]);  // in no chunk
}

TEST(OneBitPlanTest, ANonFiniteValueWritesNothing) {
  const int64_t n = 64;
  std::vector<float> sum(n, 1.0f), residual(n, 0.5f);
  sum[40] = std::numeric_limits<float>::infinity();
  const OneBitPlan plan = MakeOneBitPlan({{0, 32, 8, 8}, {32, 32, 8, 8}});
  std::vector<char> out(plan.total_bytes, 'x');
  const std::vector<float> before = residual;
  EXPECT_EQ(EncodeOneBitPlan(plan, sum, 1.0f, absl::MakeSpan(residual),
                             absl::MakeSpan(out))
                .code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(residual, before);
  for (char c : out) ASSERT_EQ(c, 'x');
}

TEST(OneBitPlanTest, RefusesPlansThatDoNotFit) {
  const int64_t n = 100;
  EXPECT_TRUE(MakeOneBitPlan({{0, 50, 10, 10}}).Validate(n).ok());
  const std::vector<std::vector<OneBitChunkPlan>> bad = {
      {{90, 20, 10, 10}},                    // past the end
      {{-1, 5, 5, 5}},                       // before the start
      {{0, 0, 1, 1}},                        // empty
      {{0, 10, 0, 1}},                       // no group size
      {{0, 10, 4, 5}},                       // F > G
      {{0, 3, 4, 4}},                        // F > count
      {{0, 10, 5, 5}, {5, 10, 5, 5}},        // overlapping
      {{50, 10, 5, 5}, {0, 10, 5, 5}},       // out of order
  };
  for (const auto& chunks : bad) {
    EXPECT_EQ(MakeOneBitPlan(chunks).Validate(n).code(),
              absl::StatusCode::kInvalidArgument)
        << chunks[0].flat_begin << "/" << chunks[0].count;
  }
  OneBitPlan shifted = MakeOneBitPlan({{0, 10, 5, 5}});
  shifted.offsets[0] = 1;
  EXPECT_EQ(shifted.Validate(n).code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace asgd
