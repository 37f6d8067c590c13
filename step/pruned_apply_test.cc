// A pruned model's mask (UpdateContext::keep) in every apply path: a pruned
// weight (0, momentum 0) stays exactly 0 under every optimizer rule and
// every push encoding, and every kept weight gets bit for bit the step of
// the gradient with the pruned entries zeroed.
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "compression/grad_codec.h"
#include "gtest/gtest.h"
#include "step/compressed_apply.h"
#include "step/optimizer.h"

namespace asgd {
namespace {

constexpr int64_t kN = 5000;  // more than two of Apply's masked blocks

std::vector<OptimizerOptions> Rules() {
  std::vector<OptimizerOptions> out;
  OptimizerOptions o;
  o.learning_rate = 0.05f;
  out.push_back(o);  // sgd
  o.momentum = 0.9f;
  out.push_back(o);
  o.nesterov = true;
  out.push_back(o);
  o = {};
  o.learning_rate = 0.05f;
  o.weight_decay = 0.01f;
  out.push_back(o);
  o.momentum = 0.5f;
  o.dc_lambda = 0.5f;
  out.push_back(o);  // momentum, decay and delay compensation
  return out;
}

struct Model {
  std::vector<uint8_t> keep;
  std::vector<float> w, v, backup;
};

// About 70% pruned: pruned weights and their momentum are 0.
Model PrunedModel(std::mt19937* rng) {
  std::normal_distribution<float> n(0.0f, 1.0f);
  Model m;
  m.keep.resize(kN);
  m.w.resize(kN);
  m.v.resize(kN);
  m.backup.resize(kN);
  for (int64_t i = 0; i < kN; ++i) {
    m.keep[i] = (*rng)() % 10 < 3;
    m.w[i] = m.keep[i] ? n(*rng) : 0.0f;
    m.v[i] = m.keep[i] ? 0.1f * n(*rng) : 0.0f;
    m.backup[i] = n(*rng);
  }
  return m;
}

std::vector<float> Gradient(std::mt19937* rng) {
  std::normal_distribution<float> n(0.0f, 1.0f);
  std::vector<float> g(kN);
  for (float& x : g) x = n(*rng);
  return g;
}

// The step without a mask, on the gradient with the pruned entries zeroed.
void ReferenceStep(const Optimizer& opt, const Model& before,
                   std::vector<float> g, uint64_t step, Model* out) {
  *out = before;
  for (int64_t i = 0; i < kN; ++i) {
    if (!before.keep[i]) g[i] = 0.0f;
  }
  UpdateContext ctx;
  ctx.step = step;
  ctx.backup = before.backup.data();
  opt.Apply(out->w.data(), opt.has_state() ? out->v.data() : nullptr,
            g.data(), kN, ctx);
}

void ExpectSame(const Model& got, const Model& want, bool state) {
  for (int64_t i = 0; i < kN; ++i) {
    ASSERT_EQ(std::memcmp(&got.w[i], &want.w[i], sizeof(float)), 0) << i;
    if (!got.keep[i]) {
      ASSERT_EQ(got.w[i], 0.0f) << i;
      if (state) {
        ASSERT_EQ(got.v[i], 0.0f) << i;
      }
    }
    if (state) {
      ASSERT_EQ(std::memcmp(&got.v[i], &want.v[i], sizeof(float)), 0) << i;
    }
  }
}

TEST(PrunedApplyTest, FloatGradientsLeavePrunedWeightsAtZero) {
  std::mt19937 rng(3);
  for (const OptimizerOptions& o : Rules()) {
    const Optimizer opt = *Optimizer::Create(o);
    Model m = PrunedModel(&rng);
    for (uint64_t step = 0; step < 3; ++step) {
      const std::vector<float> g = Gradient(&rng);
      Model want;
      ReferenceStep(opt, m, g, step, &want);
      UpdateContext ctx;
      ctx.step = step;
      ctx.backup = m.backup.data();
      ctx.keep = m.keep.data();
      opt.Apply(m.w.data(), opt.has_state() ? m.v.data() : nullptr, g.data(),
                kN, ctx);
      ExpectSame(m, want, opt.has_state());
    }
  }
}

TEST(PrunedApplyTest, CompressedGradientsLeavePrunedWeightsAtZero) {
  std::mt19937 rng(5);
  for (GradEncoding encoding : {GradEncoding::kOneBit, GradEncoding::kTopK}) {
    for (const OptimizerOptions& o : Rules()) {
      SCOPED_TRACE(GradEncodingName(encoding));
      const Optimizer opt = *Optimizer::Create(o);
      Model m = PrunedModel(&rng);
      for (uint64_t step = 0; step < 3; ++step) {
        std::vector<float> g = Gradient(&rng);
        std::vector<float> residual(kN, 0.0f);
        std::string bytes;
        // Top-k at 25%: many selected entries fall on pruned weights.
        ASSERT_TRUE((encoding == GradEncoding::kOneBit
                         ? EncodeOneBit(g, 256, 100, absl::MakeSpan(residual),
                                        &bytes)
                         : EncodeTopK(g, TopKCount(0.25, kN),
                                      absl::MakeSpan(residual), &bytes))
                        .ok());
        CodecLimits limits;
        limits.max_elements = kN;
        absl::StatusOr<CompressedChunk> chunk =
            ParseCompressedChunk(bytes, limits);
        ASSERT_TRUE(chunk.ok()) << chunk.status();
        std::vector<float> decoded(kN);
        DecodeCompressed(*chunk, 0, kN, decoded.data());
        Model want;
        ReferenceStep(opt, m, decoded, step, &want);
        UpdateContext ctx;
        ctx.step = step;
        ctx.backup = m.backup.data();
        ctx.keep = m.keep.data();
        ApplyCompressedRange(opt, absl::MakeConstSpan(&*chunk, 1), 0, kN,
                             m.w.data(),
                             opt.has_state() ? m.v.data() : nullptr, ctx);
        ExpectSame(m, want, opt.has_state());
      }
    }
  }
}

}  // namespace
}  // namespace asgd
