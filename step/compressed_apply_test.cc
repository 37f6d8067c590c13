#include "step/compressed_apply.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "compression/grad_codec.h"
#include "gtest/gtest.h"
#include "step/optimizer.h"

namespace asgd {
namespace {

std::vector<float> RandomVector(int64_t n, std::mt19937* rng,
                                float stddev = 1.0f) {
  std::normal_distribution<float> dist(0.0f, stddev);
  std::vector<float> v(n);
  for (float& x : v) x = dist(*rng);
  return v;
}

struct Variant {
  std::string name;
  OptimizerOptions options;
};

std::vector<Variant> Variants() {
  std::vector<Variant> out;
  OptimizerOptions o;
  o.learning_rate = 0.05f;
  out.push_back({"sgd", o});
  o.momentum = 0.9f;
  out.push_back({"momentum", o});
  o.nesterov = true;
  out.push_back({"nesterov", o});
  o = {};
  o.learning_rate = 0.05f;
  o.weight_decay = 0.01f;
  out.push_back({"sgd_decay", o});
  o.momentum = 0.5f;
  out.push_back({"momentum_decay", o});
  o = {};
  o.learning_rate = 0.05f;
  o.dc_lambda = 0.5f;
  out.push_back({"sgd_dc", o});
  o.schedule = LrSchedule::kStep;
  o.step_size = 2;
  o.gamma = 0.5f;
  out.push_back({"sgd_dc_step", o});
  o.schedule = LrSchedule::kExponential;
  o.weight_decay = 0.001f;
  out.push_back({"sgd_dc_decay_exponential", o});
  o.momentum = 0.9f;
  o.nesterov = true;
  out.push_back({"everything", o});
  return out;
}

// The update rule of optimizer.h in double precision, for one step. Also
// returns, per element, the sum of the magnitudes of the terms that make up
// the new w and v: float rounding errors are relative to those.
struct Reference {
  OptimizerOptions o;
  void Step(std::vector<double>& w, std::vector<double>& v,
            const std::vector<float>& g, const float* backup, uint64_t step,
            double scale, std::vector<double>* w_magnitude,
            std::vector<double>* v_magnitude) const {
    double lr = o.learning_rate;
    if (o.schedule == LrSchedule::kStep) {
      lr *= std::pow(double(o.gamma), double(step / o.step_size));
    } else if (o.schedule == LrSchedule::kExponential) {
      lr *= std::pow(double(o.gamma), double(step) / o.step_size);
    }
    lr *= scale;
    const double mu = o.momentum;
    for (size_t i = 0; i < w.size(); ++i) {
      double dc = 0;
      if (backup != nullptr && o.dc_lambda > 0) {
        dc = o.dc_lambda * double(g[i]) * g[i] * (w[i] - backup[i]);
      }
      const double decay = o.weight_decay * w[i];
      const double gi = g[i] + dc + decay;
      const double gm = std::fabs(g[i]) + std::fabs(dc) + std::fabs(decay);
      if (mu == 0) {
        w[i] -= lr * gi;
        (*w_magnitude)[i] = std::fabs(w[i]) + 2 * lr * gm;
        (*v_magnitude)[i] = 0;
      } else {
        const double vm = mu * std::fabs(v[i]) + gm;
        v[i] = mu * v[i] + gi;
        w[i] -= lr * (o.nesterov ? gi + mu * v[i] : v[i]);
        (*w_magnitude)[i] =
            std::fabs(w[i]) + 2 * lr * (o.nesterov ? gm + mu * vm : vm);
        (*v_magnitude)[i] = vm;
      }
    }
  }
};

std::string Encode(GradEncoding encoding, const std::vector<float>& grad,
                   std::mt19937* rng, double fraction) {
  std::vector<float> residual = RandomVector(grad.size(), rng, 0.1f);
  std::string bytes;
  const int64_t n = grad.size();
  absl::Status s;
  if (encoding == GradEncoding::kOneBit) {
    const int64_t g = 1 + (*rng)() % 600;
    const int64_t f = 1 + (*rng)() % std::min<int64_t>(g, n);
    s = EncodeOneBit(grad, g, f, absl::MakeSpan(residual), &bytes);
  } else {
    s = EncodeTopK(grad, TopKCount(fraction, n), absl::MakeSpan(residual),
                   &bytes);
  }
  EXPECT_TRUE(s.ok()) << s;
  return bytes;
}

struct Case {
  GradEncoding encoding;
  double fraction;  // top-k only
  std::string name;
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

class CompressedApplyTest : public ::testing::TestWithParam<Case> {};

// For every optimizer option and random slices [begin, end) that cut groups:
// the fused apply equals decode + Optimizer::Apply bit for bit, and both
// equal the double-precision reference up to float rounding.
TEST_P(CompressedApplyTest, MatchesDecodeThenApplyAndDoubleReference) {
  const Case& c = GetParam();
  constexpr double kEps = 1.0 / (1 << 24);
  std::mt19937 rng(17);
  for (const Variant& variant : Variants()) {
    SCOPED_TRACE(variant.name);
    auto opt = Optimizer::Create(variant.options);
    ASSERT_TRUE(opt.ok()) << opt.status();
    for (int trial = 0; trial < 12; ++trial) {
      const int64_t n = 1 + rng() % 9000;  // several apply blocks
      const int64_t begin = trial == 0 ? 0 : rng() % n;
      const int64_t end = trial == 0 ? n : begin + 1 + rng() % (n - begin);
      const int64_t m = end - begin;
      std::vector<float> w = RandomVector(m, &rng);
      std::vector<float> v = RandomVector(m, &rng, 0.1f);
      std::vector<float> w2 = w, v2 = v;
      std::vector<float> backup = w;
      for (float& b : backup) b += 0.05f * RandomVector(1, &rng)[0];
      for (uint64_t step = 0; step < 3; ++step) {
        const std::vector<float> grad = RandomVector(n, &rng);
        const std::string bytes = Encode(c.encoding, grad, &rng, c.fraction);
        absl::StatusOr<CompressedChunk> chunk = ParseCompressedChunk(bytes, {});
        ASSERT_TRUE(chunk.ok()) << chunk.status();
        const float scale = 0.5f + 0.25f * trial;
        UpdateContext ctx{scale, step,
                          opt->needs_backup() ? backup.data() : nullptr};
        // Reference state before the step, in double.
        std::vector<double> rw(w.begin(), w.end()), rv(v.begin(), v.end());
        // Fused.
        float max_w_before = 0.0f;
        for (float x : w) max_w_before = std::max(max_w_before, std::fabs(x));
        const ApplyStats fused =
            ApplyCompressed(*opt, *chunk, begin, end, w.data(),
                            opt->has_state() ? v.data() : nullptr, ctx);
        // Decode to float32, then Optimizer::Apply.
        std::vector<float> decoded(n);
        DecodeCompressed(*chunk, 0, n, decoded.data());
        const ApplyStats unfused =
            opt->Apply(w2.data(), opt->has_state() ? v2.data() : nullptr,
                       decoded.data() + begin, m, ctx);
        // The maxima it reports: exact, or on the sparse path those of the
        // weights it changed, which with the others' old maximum bound all.
        if (AppliesSparsely(*opt, chunk->encoding)) {
          EXPECT_LE(fused.max_abs_w, unfused.max_abs_w);
          EXPECT_GE(std::max(fused.max_abs_w, max_w_before),
                    unfused.max_abs_w);
        } else {
          EXPECT_EQ(fused.max_abs_w, unfused.max_abs_w);
          EXPECT_EQ(fused.max_abs_v, unfused.max_abs_v);
        }
        ASSERT_EQ(0, std::memcmp(w.data(), w2.data(), m * sizeof(float)))
            << "weights differ from decode + Apply, trial " << trial;
        ASSERT_EQ(0, std::memcmp(v.data(), v2.data(), m * sizeof(float)))
            << "momentum differs from decode + Apply, trial " << trial;
        // Double reference on the decoded gradient.
        std::vector<float> g(decoded.begin() + begin, decoded.begin() + end);
        std::vector<double> w_magnitude(m), v_magnitude(m);
        Reference{variant.options}.Step(rw, rv, g, ctx.backup, step, scale,
                                        &w_magnitude, &v_magnitude);
        for (int64_t i = 0; i < m; ++i) {
          // A handful of float roundings, each relative to a term no larger
          // than the magnitudes (the learning rate's float pow included).
          ASSERT_LE(std::fabs(w[i] - rw[i]), 8 * kEps * w_magnitude[i])
              << "trial " << trial << " step " << step << " element " << i;
          if (opt->has_state()) {
            ASSERT_LE(std::fabs(v[i] - rv[i]), 8 * kEps * v_magnitude[i])
                << "trial " << trial << " step " << step << " element " << i;
          }
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Encodings, CompressedApplyTest,
    ::testing::Values(Case{GradEncoding::kOneBit, 0, "OneBit"},
                      Case{GradEncoding::kTopK, 0.001, "TopK0_1pct"},
                      Case{GradEncoding::kTopK, 0.05, "TopK5pct"},
                      Case{GradEncoding::kTopK, 1.0, "TopKAll"}),
    [](const auto& info) { return info.param.name; });

// A server range made of several chunks, split among shards at arbitrary
// points: every shard's ApplyCompressedRange equals decode + Apply of its
// part.
TEST(CompressedApplyRangeTest, ShardsOfAChunkSequence) {
  std::mt19937 rng(23);
  OptimizerOptions o;
  o.learning_rate = 0.1f;
  o.momentum = 0.9f;
  auto momentum = Optimizer::Create(o);
  auto sgd = Optimizer::Create({0.1f});
  ASSERT_TRUE(momentum.ok() && sgd.ok());
  for (int trial = 0; trial < 40; ++trial) {
    std::vector<std::string> bytes;
    std::vector<CompressedChunk> chunks;
    int64_t total = 0;
    const int num_chunks = 1 + rng() % 5;
    for (int k = 0; k < num_chunks; ++k) {
      const int64_t n = 1 + rng() % 5000;
      bytes.push_back(
          Encode(k % 2 == 0 ? GradEncoding::kOneBit : GradEncoding::kTopK,
                 RandomVector(n, &rng), &rng, 0.02));
      total += n;
    }
    for (const std::string& b : bytes) {
      chunks.push_back(*ParseCompressedChunk(b, {}));
    }
    std::vector<float> decoded;
    for (const CompressedChunk& chunk : chunks) {
      std::vector<float> part(chunk.count);
      DecodeCompressed(chunk, 0, chunk.count, part.data());
      decoded.insert(decoded.end(), part.begin(), part.end());
    }
    ASSERT_EQ(static_cast<int64_t>(decoded.size()), total);
    const Optimizer& opt = trial % 2 == 0 ? *momentum : *sgd;
    std::vector<float> w = RandomVector(total, &rng), v(total, 0.01f);
    std::vector<float> w2 = w, v2 = v;
    // Shard boundaries at random points.
    std::vector<int64_t> cuts = {0, total};
    for (int s = 0; s < 3; ++s) cuts.push_back(rng() % (total + 1));
    std::sort(cuts.begin(), cuts.end());
    for (size_t s = 0; s + 1 < cuts.size(); ++s) {
      const int64_t b = cuts[s], e = cuts[s + 1];
      ApplyCompressedRange(opt, chunks, b, e, w.data() + b, v.data() + b,
                           {1.0f, 0, nullptr});
    }
    opt.Apply(w2.data(), v2.data(), decoded.data(), total, {1.0f, 0, nullptr});
    ASSERT_EQ(0, std::memcmp(w.data(), w2.data(), total * sizeof(float)))
        << "trial " << trial;
    ASSERT_EQ(0, std::memcmp(v.data(), v2.data(), total * sizeof(float)))
        << "trial " << trial;
  }
}

// The all-or-none check on compressed gradients says what
// Optimizer::StaysBounded says on the decoded ones, over random slices of
// chunk sequences with gradients large enough to overflow some updates; the
// chunks' largest |value| is the decoded one's, and the range decode is the
// chunks' decodes end to end.
TEST(CompressedApplyRangeTest, BoundsCheckAndMaximaMatchTheDecodedGradient) {
  std::mt19937 rng(31);
  OptimizerOptions o;
  o.learning_rate = 1.0f;
  o.momentum = 0.5f;
  auto momentum = Optimizer::Create(o);
  auto sgd = Optimizer::Create({1.0f});
  ASSERT_TRUE(momentum.ok() && sgd.ok());
  int refused = 0, accepted = 0;
  for (int trial = 0; trial < 60; ++trial) {
    std::vector<std::string> bytes;
    std::vector<CompressedChunk> chunks;
    int64_t total = 0;
    const GradEncoding encoding =
        trial % 2 == 0 ? GradEncoding::kOneBit : GradEncoding::kTopK;
    for (int k = 0; k < 1 + static_cast<int>(rng() % 4); ++k) {
      const int64_t n = 1 + rng() % 3000;
      // Magnitudes near the bound in some trials.
      const float scale = trial % 3 == 0   ? 3e37f
                          : trial % 3 == 1 ? 4e36f
                                           : 1.0f;
      bytes.push_back(Encode(encoding, RandomVector(n, &rng, scale), &rng,
                             0.05));
      total += n;
    }
    float max_abs = 0.0f;
    for (const std::string& b : bytes) {
      chunks.push_back(*ParseCompressedChunk(b, {}));
      max_abs = std::max(max_abs, CompressedMaxAbs(chunks.back()));
    }
    std::vector<float> decoded(total);
    DecodeCompressedRange(chunks, decoded.data());
    float decoded_max = 0.0f;
    int64_t at = 0;
    for (const CompressedChunk& c : chunks) {
      std::vector<float> part(c.count);
      DecodeCompressed(c, 0, c.count, part.data());
      for (int64_t i = 0; i < c.count; ++i) {
        ASSERT_EQ(decoded[at + i], part[i]);
        decoded_max = std::max(decoded_max, std::fabs(part[i]));
      }
      at += c.count;
    }
    EXPECT_EQ(max_abs, decoded_max) << "trial " << trial;
    const Optimizer& opt = trial % 4 < 2 ? *momentum : *sgd;
    const float w_scale = trial % 5 == 0 ? 5e36f : 1.0f;
    const std::vector<float> w = RandomVector(total, &rng, w_scale);
    const std::vector<float> v = RandomVector(total, &rng, w_scale);
    const int64_t b = rng() % total;
    const int64_t e = b + 1 + rng() % (total - b);
    const bool fused = CompressedStaysBounded(
        opt, chunks, b, e, w.data() + b, v.data() + b, {1.0f, 0, nullptr});
    const bool reference =
        opt.StaysBounded(w.data() + b, v.data() + b, decoded.data() + b,
                         e - b, {1.0f, 0, nullptr});
    EXPECT_EQ(fused, reference) << "trial " << trial;
    (fused ? accepted : refused)++;
  }
  // Both outcomes were exercised.
  EXPECT_GT(refused, 0);
  EXPECT_GT(accepted, 0);
}

TEST(CompressedApplyTest, SparseTopKTouchesOnlySelectedWeights) {
  std::vector<float> grad(10000, 0.0f);
  grad[17] = 1.0f;
  grad[9000] = -2.0f;
  std::vector<float> residual(grad.size(), 0.0f);
  std::string bytes;
  ASSERT_TRUE(EncodeTopK(grad, 2, absl::MakeSpan(residual), &bytes).ok());
  auto opt = Optimizer::Create({0.5f});
  ASSERT_TRUE(opt.ok());
  std::vector<float> w(grad.size(), 3.0f);
  w[5] = -0.0f;
  ASSERT_TRUE(
      ApplyCompressedBytes(*opt, bytes, {}, w.data(), nullptr, w.size(), {})
          .ok());
  for (size_t i = 0; i < w.size(); ++i) {
    const float want = i == 17     ? 2.5f
                       : i == 9000 ? 4.0f
                       : i == 5    ? -0.0f
                                   : 3.0f;
    ASSERT_EQ(w[i], want) << i;
    ASSERT_EQ(std::signbit(w[i]), std::signbit(want)) << i;
  }
}

TEST(CompressedApplyTest, MalformedInputWritesNothing) {
  OptimizerOptions o;
  o.learning_rate = 0.1f;
  o.momentum = 0.9f;
  auto opt = Optimizer::Create(o);
  ASSERT_TRUE(opt.ok());
  std::mt19937 rng(29);
  const std::vector<float> grad = RandomVector(1000, &rng);
  std::vector<float> residual(grad.size(), 0.0f);
  std::string one_bit, top_k;
  ASSERT_TRUE(
      EncodeOneBit(grad, 128, 100, absl::MakeSpan(residual), &one_bit).ok());
  ASSERT_TRUE(EncodeTopK(grad, 50, absl::MakeSpan(residual), &top_k).ok());
  std::vector<std::string> bad = {
      one_bit.substr(0, one_bit.size() - 1),  // truncated
      top_k + "x",                            // trailing byte
  };
  std::string nan_level = one_bit;
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::memcpy(&nan_level[16 + 8 * 3], &nan, 4);
  bad.push_back(nan_level);
  // The header's count lowered to the last index: that index is out of
  // range (and the sizes still add up).
  std::string out_of_range = top_k;
  {
    const CompressedChunk chunk = *ParseCompressedChunk(top_k, {});
    TopKReader reader(chunk);
    int64_t index, last = 0;
    float value;
    while (reader.Next(&index, &value)) last = index;
    ASSERT_GE(last, 50);
    const uint32_t count = static_cast<uint32_t>(last);
    std::memcpy(&out_of_range[4], &count, 4);
    EXPECT_EQ(ParseCompressedChunk(out_of_range, {}).status().code(),
              absl::StatusCode::kInvalidArgument);
  }
  bad.push_back(out_of_range);
  const std::vector<float> w0 = RandomVector(1000, &rng), v0(1000, 0.5f);
  for (size_t k = 0; k < bad.size(); ++k) {
    std::vector<float> w = w0, v = v0;
    const absl::Status s =
        ApplyCompressedBytes(*opt, bad[k], {}, w.data(), v.data(), 1000, {});
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << k;
    EXPECT_EQ(w, w0) << k;
    EXPECT_EQ(v, v0) << k;
  }
  // A valid chunk of the wrong size.
  std::vector<float> w = w0, v = v0;
  EXPECT_EQ(ApplyCompressedBytes(*opt, one_bit, {}, w.data(), v.data(), 999, {})
                .code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(w, w0);
  // And the limits.
  CodecLimits small;
  small.max_elements = 999;
  EXPECT_EQ(
      ApplyCompressedBytes(*opt, one_bit, small, w.data(), v.data(), 1000, {})
          .code(),
      absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(w, w0);
  EXPECT_EQ(v, v0);
}

}  // namespace
}  // namespace asgd
