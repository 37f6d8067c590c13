#include "compression/grad_codec.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace asgd {
namespace {

std::vector<float> RandomVector(int64_t n, uint32_t seed, float mean = 0.0f,
                                float stddev = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(mean, stddev);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

CompressedChunk MustParse(const std::string& bytes,
                          const CodecLimits& limits = {}) {
  absl::StatusOr<CompressedChunk> chunk = ParseCompressedChunk(bytes, limits);
  EXPECT_TRUE(chunk.ok()) << chunk.status();
  return *chunk;
}

std::vector<float> DecodeAll(const std::string& bytes) {
  const CompressedChunk chunk = MustParse(bytes);
  std::vector<float> out(chunk.count);
  DecodeCompressed(chunk, 0, chunk.count, out.data());
  return out;
}

// The group bounds of the format: [0, F), then G at a time.
std::vector<std::pair<int64_t, int64_t>> Groups(int64_t n, int64_t g,
                                                int64_t f) {
  std::vector<std::pair<int64_t, int64_t>> out = {{0, f}};
  for (int64_t b = f; b < n; b += g) out.push_back({b, std::min(n, b + g)});
  return out;
}

float Ulp(float x) {
  const float a = std::fabs(x);
  return std::nextafter(a, std::numeric_limits<float>::infinity()) - a;
}

TEST(OneBitTest, LevelsAreTheGroupMeansAndBitsTheSigns) {
  const int64_t n = 5000, g = 777, f = 100;  // groups cut at both ends
  const std::vector<float> grad = RandomVector(n, 1);
  std::vector<float> residual = RandomVector(n, 2, 0.0f, 0.1f);
  std::vector<float> a(n);
  for (int64_t i = 0; i < n; ++i) a[i] = grad[i] + residual[i];
  std::string bytes;
  ASSERT_TRUE(EncodeOneBit(grad, g, f, absl::MakeSpan(residual), &bytes).ok());
  EXPECT_EQ(static_cast<int64_t>(bytes.size()), OneBitEncodedSize(n, g, f));
  const CompressedChunk chunk = MustParse(bytes);
  EXPECT_EQ(chunk.encoding, GradEncoding::kOneBit);
  EXPECT_EQ(chunk.count, n);
  EXPECT_EQ(chunk.group_size, g);
  EXPECT_EQ(chunk.first_group, f);
  const auto groups = Groups(n, g, f);
  ASSERT_EQ(chunk.num_groups, static_cast<int64_t>(groups.size()));
  std::vector<float> decoded(n);
  DecodeCompressed(chunk, 0, n, decoded.data());
  for (size_t k = 0; k < groups.size(); ++k) {
    long double neg = 0, pos = 0;
    int64_t num_neg = 0, num_pos = 0;
    for (int64_t i = groups[k].first; i < groups[k].second; ++i) {
      if (a[i] >= 0) {
        pos += a[i];
        ++num_pos;
      } else {
        neg += a[i];
        ++num_neg;
      }
    }
    ASSERT_GT(num_neg, 0);
    ASSERT_GT(num_pos, 0);
    const long double mean_neg = neg / num_neg, mean_pos = pos / num_pos;
    float level_neg, level_pos;
    std::memcpy(&level_neg, chunk.levels + 8 * k, 4);
    std::memcpy(&level_pos, chunk.levels + 8 * k + 4, 4);
    // The float nearest to the mean (the sum runs in double: 1e-12 slack).
    EXPECT_LE(std::fabs(level_neg - mean_neg),
              0.5 * Ulp(level_neg) + 1e-12 * std::fabs(mean_neg))
        << "group " << k;
    EXPECT_LE(std::fabs(level_pos - mean_pos),
              0.5 * Ulp(level_pos) + 1e-12 * std::fabs(mean_pos))
        << "group " << k;
    for (int64_t i = groups[k].first; i < groups[k].second; ++i) {
      ASSERT_EQ(decoded[i], a[i] >= 0 ? level_pos : level_neg) << i;
      // Error feedback: the residual is exactly what the encoding lost.
      ASSERT_EQ(residual[i], a[i] - decoded[i]) << i;
    }
  }
}

TEST(OneBitTest, ExactMeansAndEmptyParts) {
  // Group 0: {-1, -2, -6, 4} -> (-3, 4); group 1: all non-negative, so its
  // negative level is 0; group 2: all negative.
  const std::vector<float> grad = {-1, -2, -6, 4, 0, 1, 2, 3, -0.5f, -1.5f};
  std::vector<float> residual(grad.size(), 0.0f);
  std::string bytes;
  ASSERT_TRUE(EncodeOneBit(grad, 4, 4, absl::MakeSpan(residual), &bytes).ok());
  const CompressedChunk chunk = MustParse(bytes);
  ASSERT_EQ(chunk.num_groups, 3);
  std::vector<float> levels(6);
  std::memcpy(levels.data(), chunk.levels, 24);
  EXPECT_EQ(levels, (std::vector<float>{-3, 4, 0, 1.5f, -1, 0}));
  EXPECT_EQ(DecodeAll(bytes), (std::vector<float>{-3, -3, -3, 4, 1.5f, 1.5f,
                                                  1.5f, 1.5f, -1, -1}));
  EXPECT_EQ(residual, (std::vector<float>{2, 1, -3, 0, -1.5f, -0.5f, 0.5f, 1.5f,
                                          0.5f, -0.5f}));
}

TEST(OneBitTest, SizeIsAboutOneBitPerElement) {
  // 2048-element groups (a hidden layer's row): 1 + 64/2048 bits.
  const int64_t n = 256 * 1024;
  EXPECT_EQ(OneBitEncodedSize(n, 2048, 2048), 16 + 8 * 128 + n / 8);
  EXPECT_LT(OneBitEncodedSize(n, 2048, 2048) * 8.0 / n, 1.04);
}

TEST(OneBitTest, SubrangeDecodeMatchesFullDecode) {
  std::mt19937 rng(5);
  for (int trial = 0; trial < 50; ++trial) {
    const int64_t n = 1 + rng() % 3000;
    const int64_t g = 1 + rng() % 300;
    const int64_t f = 1 + rng() % std::min(g, n);
    const std::vector<float> grad = RandomVector(n, trial);
    std::vector<float> residual(n, 0.0f);
    std::string bytes;
    ASSERT_TRUE(
        EncodeOneBit(grad, g, f, absl::MakeSpan(residual), &bytes).ok());
    const CompressedChunk chunk = MustParse(bytes);
    const std::vector<float> full = DecodeAll(bytes);
    const int64_t begin = rng() % (n + 1);
    const int64_t end = begin + rng() % (n - begin + 1);
    std::vector<float> part(end - begin + 1, 42.0f);
    DecodeCompressed(chunk, begin, end, part.data());
    for (int64_t i = begin; i < end; ++i) ASSERT_EQ(part[i - begin], full[i]);
    EXPECT_EQ(part.back(), 42.0f) << "wrote past end";
  }
}

// Reference top-k: indices sorted by (|a| descending, index ascending).
std::vector<int64_t> ReferenceTopK(const std::vector<float>& a, int64_t k) {
  std::vector<int64_t> idx(a.size());
  std::iota(idx.begin(), idx.end(), 0);
  std::stable_sort(idx.begin(), idx.end(), [&](int64_t x, int64_t y) {
    return std::fabs(a[x]) > std::fabs(a[y]);
  });
  idx.resize(k);
  std::sort(idx.begin(), idx.end());
  return idx;
}

TEST(TopKTest, PicksExactlyTheKLargestMagnitudes) {
  std::mt19937 rng(9);
  for (int trial = 0; trial < 40; ++trial) {
    const int64_t n = 1 + rng() % 20000;
    std::vector<float> grad = RandomVector(n, 100 + trial);
    // Ties, zeros and negatives at the threshold, sometimes.
    if (trial % 3 == 0) {
      for (float& x : grad) x = std::round(x * 2.0f) / 2.0f;
    }
    std::vector<float> residual = RandomVector(n, 200 + trial, 0.0f, 0.01f);
    if (trial % 3 == 0) std::fill(residual.begin(), residual.end(), 0.0f);
    std::vector<float> a(n);
    for (int64_t i = 0; i < n; ++i) a[i] = grad[i] + residual[i];
    const int64_t k = trial == 1 ? 0 : trial == 2 ? n : rng() % (n + 1);
    std::string bytes;
    ASSERT_TRUE(EncodeTopK(grad, k, absl::MakeSpan(residual), &bytes).ok());
    const CompressedChunk chunk = MustParse(bytes);
    ASSERT_EQ(chunk.encoding, GradEncoding::kTopK);
    ASSERT_EQ(chunk.k, k);
    const std::vector<int64_t> want = ReferenceTopK(a, k);
    TopKReader reader(chunk);
    int64_t index;
    float value;
    std::vector<int64_t> got;
    while (reader.Next(&index, &value)) {
      got.push_back(index);
      ASSERT_EQ(value, a[index]);
    }
    ASSERT_EQ(got, want) << "trial " << trial << " n " << n << " k " << k;
    std::vector<bool> selected(n, false);
    for (int64_t i : want) selected[i] = true;
    const std::vector<float> decoded = DecodeAll(bytes);
    for (int64_t i = 0; i < n; ++i) {
      ASSERT_EQ(decoded[i], selected[i] ? a[i] : 0.0f);
      ASSERT_EQ(residual[i], selected[i] ? 0.0f : a[i]);
    }
  }
}

TEST(TopKTest, IndicesAreDeltaCoded) {
  // Indices 0, 1, 200, 20000: gaps 0, 0, 198 (2 bytes), 19799 (3 bytes).
  std::vector<float> grad(30000, 0.0f);
  grad[0] = 4;
  grad[1] = -3;
  grad[200] = 2;
  grad[20000] = -5;
  std::vector<float> residual(grad.size(), 0.0f);
  std::string bytes;
  ASSERT_TRUE(EncodeTopK(grad, 4, absl::MakeSpan(residual), &bytes).ok());
  EXPECT_EQ(bytes.size(), 16u + 4 * 4 + (1 + 1 + 2 + 3));
  const std::vector<float> decoded = DecodeAll(bytes);
  EXPECT_EQ(decoded, grad);
}

TEST(TopKTest, SubrangeDecodeMatchesFullDecode) {
  std::mt19937 rng(11);
  for (int trial = 0; trial < 30; ++trial) {
    const int64_t n = 1 + rng() % 5000;
    const std::vector<float> grad = RandomVector(n, trial);
    std::vector<float> residual(n, 0.0f);
    std::string bytes;
    ASSERT_TRUE(
        EncodeTopK(grad, TopKCount(0.05, n), absl::MakeSpan(residual), &bytes)
            .ok());
    const std::vector<float> full = DecodeAll(bytes);
    const int64_t begin = rng() % (n + 1);
    const int64_t end = begin + rng() % (n - begin + 1);
    std::vector<float> part(end - begin + 1, 42.0f);
    DecodeCompressed(MustParse(bytes), begin, end, part.data());
    for (int64_t i = begin; i < end; ++i) ASSERT_EQ(part[i - begin], full[i]);
    EXPECT_EQ(part.back(), 42.0f) << "wrote past end";
  }
}

TEST(TopKTest, CountFromFraction) {
  EXPECT_EQ(TopKCount(0.01, 1000), 10);
  EXPECT_EQ(TopKCount(0.01, 1001), 11);  // rounded up
  EXPECT_EQ(TopKCount(0.001, 10), 1);    // at least one
  EXPECT_EQ(TopKCount(1.0, 7), 7);
  EXPECT_EQ(TopKCount(0.5, 0), 0);
}

// Error feedback: over many steps the decoded gradients sum to the true ones
// minus the final residual, and the residual stays bounded; without feedback
// the gap grows with the number of steps.
enum class Codec { kOneBit, kTopK };

class ErrorFeedbackTest : public ::testing::TestWithParam<Codec> {};

TEST_P(ErrorFeedbackTest, DecodedSumTracksTrueSum) {
  const int64_t n = 4096;
  const int steps = 400;
  // A fixed direction plus noise, as minibatch gradients are.
  const std::vector<float> drift = RandomVector(n, 77, 0.0f, 0.3f);
  std::vector<float> residual(n, 0.0f), no_feedback(n, 0.0f);
  std::vector<double> true_sum(n, 0.0), decoded_sum(n, 0.0), plain_sum(n, 0.0);
  double max_residual_first_half = 0, max_residual_second_half = 0;
  double max_grad = 0;
  for (int s = 0; s < steps; ++s) {
    std::vector<float> grad = RandomVector(n, 1000 + s);
    for (int64_t i = 0; i < n; ++i) grad[i] += drift[i];
    std::string bytes, plain;
    if (GetParam() == Codec::kOneBit) {
      ASSERT_TRUE(
          EncodeOneBit(grad, 512, 300, absl::MakeSpan(residual), &bytes).ok());
      std::fill(no_feedback.begin(), no_feedback.end(), 0.0f);
      ASSERT_TRUE(
          EncodeOneBit(grad, 512, 300, absl::MakeSpan(no_feedback), &plain)
              .ok());
    } else {
      ASSERT_TRUE(
          EncodeTopK(grad, n / 20, absl::MakeSpan(residual), &bytes).ok());
      std::fill(no_feedback.begin(), no_feedback.end(), 0.0f);
      ASSERT_TRUE(
          EncodeTopK(grad, n / 20, absl::MakeSpan(no_feedback), &plain).ok());
    }
    const std::vector<float> decoded = DecodeAll(bytes);
    const std::vector<float> decoded_plain = DecodeAll(plain);
    double max_r = 0;
    for (int64_t i = 0; i < n; ++i) {
      true_sum[i] += grad[i];
      decoded_sum[i] += decoded[i];
      plain_sum[i] += decoded_plain[i];
      max_r = std::max(max_r, std::fabs(double(residual[i])));
      max_grad = std::max(max_grad, std::fabs(double(grad[i])));
    }
    (s < steps / 2 ? max_residual_first_half : max_residual_second_half) =
        std::max(
            s < steps / 2 ? max_residual_first_half : max_residual_second_half,
            max_r);
  }
  double gap = 0, gap_plain = 0, identity = 0;
  for (int64_t i = 0; i < n; ++i) {
    gap = std::max(gap, std::fabs(true_sum[i] - decoded_sum[i]));
    gap_plain = std::max(gap_plain, std::fabs(true_sum[i] - plain_sum[i]));
    // sum(decoded) = sum(true) - residual, up to float rounding of the steps.
    identity = std::max(identity,
                        std::fabs(true_sum[i] - decoded_sum[i] - residual[i]));
  }
  EXPECT_LT(identity, 1e-3);
  // Bounded: the residual of the second half is no larger than a small
  // multiple of the first half's (it does not grow with the step count), and
  // within a few gradients' worth.
  const double bound =
      GetParam() == Codec::kOneBit ? 4 * max_grad : 40 * max_grad;
  EXPECT_LT(max_residual_second_half, bound);
  EXPECT_LT(max_residual_second_half, 2 * max_residual_first_half + 1e-6);
  EXPECT_LE(gap, max_residual_second_half + 1e-3);
  // Without the residual, the decoded sum drifts away from the true one.
  EXPECT_GT(gap_plain, 5 * gap);
}

INSTANTIATE_TEST_SUITE_P(Codecs, ErrorFeedbackTest,
                         ::testing::Values(Codec::kOneBit, Codec::kTopK),
                         [](const auto& info) {
                           return info.param == Codec::kOneBit ? "OneBit"
                                                               : "TopK";
                         });

TEST(EncodeTest, NonFiniteInputChangesNothing) {
  for (float bad : {std::numeric_limits<float>::quiet_NaN(),
                    std::numeric_limits<float>::infinity(),
                    -std::numeric_limits<float>::infinity()}) {
    std::vector<float> grad = RandomVector(1000, 3);
    grad[517] = bad;
    std::vector<float> residual = RandomVector(1000, 4);
    const std::vector<float> residual_before = residual;
    std::string out = "untouched";
    absl::Status s =
        EncodeOneBit(grad, 100, 100, absl::MakeSpan(residual), &out);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    s = EncodeTopK(grad, 10, absl::MakeSpan(residual), &out);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(out, "untouched");
    EXPECT_EQ(residual, residual_before);
  }
  // Finite inputs whose sum overflows.
  std::vector<float> grad = {3e38f, 1.0f};
  std::vector<float> residual = {3e38f, 0.0f};
  std::string out;
  EXPECT_EQ(EncodeTopK(grad, 1, absl::MakeSpan(residual), &out).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(EncodeTest, RefusesBadParameters) {
  std::vector<float> grad(10, 1.0f), residual(10, 0.0f), short_residual(9);
  std::string out;
  auto r = absl::MakeSpan(residual);
  EXPECT_FALSE(EncodeOneBit(grad, 0, 1, r, &out).ok());
  EXPECT_FALSE(EncodeOneBit(grad, 4, 0, r, &out).ok());
  EXPECT_FALSE(EncodeOneBit(grad, 4, 5, r, &out).ok());    // F > G
  EXPECT_FALSE(EncodeOneBit(grad, 40, 11, r, &out).ok());  // F > count
  EXPECT_FALSE(
      EncodeOneBit(grad, 4, 4, absl::MakeSpan(short_residual), &out).ok());
  EXPECT_FALSE(EncodeOneBit({}, 4, 4, {}, &out).ok());
  EXPECT_FALSE(EncodeTopK(grad, 11, r, &out).ok());
  EXPECT_FALSE(EncodeTopK(grad, -1, r, &out).ok());
  EXPECT_TRUE(EncodeOneBit(grad, 40, 10, r, &out).ok());  // F = count < G
}

}  // namespace
}  // namespace asgd
