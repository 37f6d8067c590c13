#include "model/resident_check.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "common/wire_codec.h"
#include "compression/grad_codec.h"
#include "compression/top_k_plan.h"
#include "gtest/gtest.h"

namespace asgd {
namespace {

double MaxAbs(const std::vector<float>& v) {
  double m = 0;
  for (float x : v) m = std::max(m, std::fabs(static_cast<double>(x)));
  return m;
}

// Float32 units in the last place between a and b (same sign assumed).
int64_t UlpDistance(float a, float b) {
  int32_t ia, ib;
  std::memcpy(&ia, &a, 4);
  std::memcpy(&ib, &b, 4);
  return std::llabs(static_cast<int64_t>(ia) - ib);
}

// Compares two encodings of `plan`, chunk by chunk.
void ExpectSameOneBit(const OneBitPlan& plan, const std::vector<char>& got,
                      const std::vector<char>& want, bool exact) {
  if (exact) {
    EXPECT_TRUE(got == want) << "1-bit bytes differ from the reference";
    return;
  }
  CodecLimits limits;
  limits.max_elements = kGradCodecMaxElements;
  limits.max_group_size = kGradCodecMaxGroupSize;
  int mean_mismatches = 0;
  for (size_t c = 0; c < plan.chunks.size(); ++c) {
    const int64_t size = plan.ChunkBytes(c);
    auto g = ParseCompressedChunk(
        absl::string_view(got.data() + plan.offsets[c], size), limits);
    auto w = ParseCompressedChunk(
        absl::string_view(want.data() + plan.offsets[c], size), limits);
    ASSERT_TRUE(g.ok()) << "chunk " << c << ": " << g.status();
    ASSERT_TRUE(w.ok()) << "chunk " << c << ": " << w.status();
    ASSERT_EQ(g->num_groups, w->num_groups);
    EXPECT_EQ(std::memcmp(g->bits, w->bits, (g->count + 7) / 8), 0)
        << "chunk " << c << ": bits differ";
    for (int64_t k = 0; k < 2 * g->num_groups; ++k) {
      float a, b;
      std::memcpy(&a, g->levels + 4 * k, 4);
      std::memcpy(&b, w->levels + 4 * k, 4);
      EXPECT_LE(UlpDistance(a, b), 1) << "chunk " << c << " level " << k;
      mean_mismatches += a != b;
    }
  }
  ::testing::Test::RecordProperty("one_bit_means_off_by_one_unit",
                                  mean_mismatches);
}

}  // namespace

std::vector<TestBatch> RandomBatches(const ModelSpec& spec, int count,
                                     int rows, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(-1, 1);
  std::vector<TestBatch> out(count);
  for (TestBatch& b : out) {
    b.inputs.resize(int64_t{rows} * spec.input_dim());
    for (float& x : b.inputs) x = u(rng);
    for (int i = 0; i < rows; ++i) {
      b.labels.push_back(static_cast<int32_t>(rng() % spec.num_classes));
    }
  }
  return out;
}

OneBitPlan VariedPlan(int64_t num_params) {
  const int64_t counts[] = {1, 5, 64, 1000, 4097, 333};
  const int64_t groups[] = {1, 3, 8, 2048, 100, 7};
  std::vector<OneBitChunkPlan> chunks;
  int64_t at = 0;
  for (int i = 0; at < num_params; ++i) {
    OneBitChunkPlan c;
    c.flat_begin = at;
    c.count = std::min(counts[i % 6], num_params - at);
    c.group_size = groups[(i / 2) % 6];
    c.first_group = std::max<int64_t>(
        1, std::min(c.group_size, c.count) - (i % 3) * 2);
    chunks.push_back(c);
    at += c.count + (i % 4 == 3 ? 2 : 0);  // leave some elements out
  }
  return MakeOneBitPlan(std::move(chunks));
}

TopKPlan VariedTopKPlan(int64_t num_params) {
  const int64_t counts[] = {1, 5000, 7, 300, 70000, 4097};
  TopKPlan plan;
  int64_t at = 0;
  for (int i = 0; at < num_params; ++i) {
    const int64_t count = std::min(counts[i % 6], num_params - at);
    // k: all, none, one, 1%, half, then again from all.
    const int64_t ks[] = {count, 0, 1, TopKCount(0.01, count), count / 2};
    plan.chunks.push_back({at, count, ks[(i / 2) % 5]});
    at += count;
    if (i % 3 == 2 && at + 2 < num_params) at += 2;  // left out
  }
  return plan;
}

void ExpectTopKMatches(ModelBackend& backend,
                       const std::vector<float>& params, uint64_t seed) {
  const int64_t n = static_cast<int64_t>(params.size());
  ASSERT_TRUE(backend.LoadModel(params).ok());
  // Everything sent: the residual becomes zero.
  TopKPlan all;
  all.chunks = {{0, n, n}};
  std::vector<std::string> got, want;
  ASSERT_TRUE(backend.TakeTopK(all, &got).ok());
  // Values of every kind: normal, few distinct levels (ties at the
  // threshold), zeros of both signs, subnormal and large.
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal;
  const float levels[] = {0.5f, -0.5f, 1.0f, -0.0f, 0.0f, 2.0f};
  std::vector<float> values(n);
  for (int64_t i = 0; i < n; ++i) {
    const int kind = static_cast<int>(rng() % 10);
    values[i] = kind < 5   ? normal(rng)
                : kind < 8 ? levels[rng() % 6]
                : kind < 9 ? 1e-40f * normal(rng)
                           : 1e30f * normal(rng);
  }
  ASSERT_TRUE(backend.RestoreResidual(0, values).ok());
  std::vector<float> ref_residual(n), residual(n);
  ASSERT_TRUE(backend.ReadResidual(absl::MakeSpan(ref_residual)).ok());
  const TopKPlan plan = VariedTopKPlan(n);
  const std::vector<float> zeros(n, 0.0f);
  for (int round = 0; round < 2; ++round) {
    ASSERT_TRUE(backend.TakeTopK(plan, &got).ok());
    ASSERT_TRUE(EncodeTopKPlan(plan, zeros, 0.0f, absl::MakeSpan(ref_residual),
                               &want)
                    .ok());
    ASSERT_EQ(got.size(), want.size());
    int chunks_off = 0;
    for (size_t c = 0; c < got.size(); ++c) chunks_off += got[c] != want[c];
    EXPECT_EQ(chunks_off, 0) << "round " << round << ": top-k chunks differ";
    ASSERT_TRUE(backend.ReadResidual(absl::MakeSpan(residual)).ok());
    EXPECT_EQ(std::memcmp(residual.data(), ref_residual.data(), 4 * n), 0)
        << "round " << round << ": the residual differs";
  }
  TopKPlan past_the_end;
  past_the_end.chunks = {{n - 1, 2, 1}};
  EXPECT_EQ(backend.TakeTopK(past_the_end, &got).code(),
            absl::StatusCode::kInvalidArgument);
}

void ExpectNonFiniteResidualRefused(ModelBackend& b, int64_t at) {
  const int64_t n = ModelParamCount(b.spec());
  ASSERT_TRUE(
      b.RestoreResidual(at, {std::numeric_limits<float>::infinity()}).ok());
  std::vector<float> before(n), after(n);
  ASSERT_TRUE(b.ReadResidual(absl::MakeSpan(before)).ok());
  const OneBitPlan plan = VariedPlan(n);
  std::vector<char> out(plan.total_bytes, 'x');
  EXPECT_EQ(b.TakeOneBit(plan, absl::MakeSpan(out)).code(),
            absl::StatusCode::kInvalidArgument);
  auto expect_only_at = [&] {
    ASSERT_TRUE(b.ReadResidual(absl::MakeSpan(after)).ok());
    for (int64_t i = 0; i < n; ++i) {
      if (i != at) {
        ASSERT_EQ(before[i], after[i]) << i;
      }
    }
    EXPECT_TRUE(std::isinf(after[at]));
  };
  expect_only_at();
  for (char c : out) ASSERT_EQ(c, 'x');
  EXPECT_EQ(b.accumulated(), 0);  // the sum was dropped
  // Top-k likewise.
  std::vector<std::string> chunks = {"kept"};
  EXPECT_EQ(b.TakeTopK(VariedTopKPlan(n), &chunks).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(chunks, std::vector<std::string>{"kept"});
  expect_only_at();
}

void ExpectResidentMatches(ModelBackend& backend, ModelBackend& reference,
                           const std::vector<float>& params,
                           const std::vector<TestBatch>& batches,
                           const OneBitPlan& plan, bool exact,
                           double tolerance) {
  const size_t n = params.size();
  ASSERT_TRUE(backend.LoadModel(params).ok());
  auto accumulate = [&] {
    for (const TestBatch& b : batches) {
      auto r = backend.AccumulateGradient(b.batch());
      ASSERT_TRUE(r.ok()) << r.status();
      EXPECT_TRUE(r->gradient_finite);
    }
    EXPECT_EQ(backend.accumulated(), static_cast<int>(batches.size()));
  };

  // 1. The average against the reference's gradients, summed in order.
  accumulate();
  std::vector<float> average(n), sum(n, 0.0f), grad(n);
  ASSERT_TRUE(backend.TakeAverage(absl::MakeSpan(average)).ok());
  EXPECT_EQ(backend.accumulated(), 0);
  for (const TestBatch& b : batches) {
    ASSERT_TRUE(
        reference.ComputeGradient(params, b.batch(), absl::MakeSpan(grad))
            .ok());
    for (size_t i = 0; i < n; ++i) sum[i] += grad[i];
  }
  const float scale = 1.0f / batches.size();
  const double bound = tolerance * MaxAbs(sum) * scale;
  int64_t off = 0;
  for (size_t i = 0; i < n; ++i) {
    const float want = sum[i] * scale;
    off += exact ? average[i] != want
                 : std::fabs(average[i] - want) > bound;
  }
  EXPECT_EQ(off, 0) << "averaged gradient elements off the reference";

  // 1b. The same average rounded to bfloat16 by the backend: the wire's
  // rounding of step 1's average, bit for bit when `exact`; else within
  // step 1's bound plus one bfloat16 rounding (2^-8 relative).
  accumulate();
  std::vector<uint16_t> bf16(n);
  ASSERT_TRUE(backend.TakeBf16(absl::MakeSpan(bf16)).ok());
  EXPECT_EQ(backend.accumulated(), 0);
  int64_t bf16_off = 0;
  for (size_t i = 0; i < n; ++i) {
    bf16_off += exact ? bf16[i] != FloatToBf16(average[i])
                      : std::fabs(Bf16ToFloat(bf16[i]) - average[i]) >
                            bound + std::fabs(average[i]) / 256;
  }
  EXPECT_EQ(bf16_off, 0) << "bfloat16 averages off the wire's rounding";
  EXPECT_EQ(backend.TakeBf16(absl::MakeSpan(bf16).first(n - 1)).code(),
            absl::StatusCode::kInvalidArgument);

  // 2. Two rounds of 1-bit pushes against EncodeOneBitPlan.
  std::vector<float> ref_residual(n, 0.0f), residual(n);
  for (int round = 0; round < 2; ++round) {
    if (!exact && round > 0) ref_residual = residual;  // same inputs
    accumulate();
    std::vector<char> got(plan.total_bytes), want(plan.total_bytes);
    ASSERT_TRUE(backend.TakeOneBit(plan, absl::MakeSpan(got)).ok());
    ASSERT_TRUE(EncodeOneBitPlan(plan, average, 1.0f,
                                 absl::MakeSpan(ref_residual),
                                 absl::MakeSpan(want))
                    .ok());
    ExpectSameOneBit(plan, got, want, exact);
    ASSERT_TRUE(backend.ReadResidual(absl::MakeSpan(residual)).ok());
    int64_t residual_off = 0;
    const double residual_bound = 1e-6 * MaxAbs(average) + 1e-30;
    for (size_t i = 0; i < n; ++i) {
      residual_off += exact ? residual[i] != ref_residual[i]
                            : std::fabs(residual[i] - ref_residual[i]) >
                                  residual_bound;
    }
    EXPECT_EQ(residual_off, 0) << "round " << round;
  }

  // 3. Restore adds to the residual.
  std::vector<float> back = {1.5f, -2.0f, 0.25f};
  ASSERT_TRUE(backend.RestoreResidual(n - 3, back).ok());
  std::vector<float> after(n);
  ASSERT_TRUE(backend.ReadResidual(absl::MakeSpan(after)).ok());
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(after[n - 3 + i], residual[n - 3 + i] + back[i]);
  }
}

}  // namespace asgd
