// LazyScorer against the CPU backend's log-posteriors of the same
// utterance (UtteranceScorer): for the DNN and the CNN, in batches smaller
// than the utterance, every active score is the full log-posterior plus its
// frame's normaliser (log sum exp of the frame's logits, checked with every
// pdf active); the full-layer comparison agrees with the lazy scores; bad
// models, sizes and active lists are refused.
#include "worker/lazy_scorer.h"

#include <cmath>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "model/model_spec.h"
#include "worker/data/toy_task.h"
#include "worker/utterance_scorer.h"

namespace asgd {
namespace {

std::vector<float> Features(int64_t frames, int dim, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0, 1);
  std::vector<float> f(frames * dim);
  for (float& v : f) v = normal(rng);
  return f;
}

std::vector<float> LogPosteriors(const ModelSpec& spec,
                                 const std::vector<float>& params,
                                 const std::vector<float>& features,
                                 int64_t frames) {
  auto scorer = UtteranceScorer::Create(spec, params, CpuBackendFactory());
  EXPECT_TRUE(scorer.ok()) << scorer.status();
  std::vector<float> out;
  EXPECT_TRUE((*scorer)->LogPosteriors(features, frames, &out).ok());
  return out;
}

double LogSumExp(const float* z, int n) {
  double m = z[0];
  for (int i = 1; i < n; ++i) m = std::max<double>(m, z[i]);
  double s = 0;
  for (int i = 0; i < n; ++i) s += std::exp(z[i] - m);
  return m + std::log(s);
}

TEST(LazyScorerTest, EveryPdfActiveGivesTheLogitsOfTheFullPosteriors) {
  for (const char* kind : {"dnn", "cnn"}) {
    const ModelSpec spec = ToyModel(kind);
    const std::vector<float> params = InitialParams(spec, 3);
    const int64_t frames = 29;
    const int k = spec.num_classes;
    const std::vector<float> f = Features(frames, spec.feature_dim, 5);
    const std::vector<float> logp = LogPosteriors(spec, params, f, frames);
    ActiveOutputs all;
    std::vector<int32_t> every(k);
    for (int p = 0; p < k; ++p) every[p] = k - 1 - p;  // any order
    for (int64_t t = 0; t < frames; ++t) all.AddFrame(every);
    LazyScorerOptions o;
    o.batch_rows = 8;  // several batches, the last one short
    auto scorer = LazyScorer::Create(spec, params, o);
    ASSERT_TRUE(scorer.ok()) << scorer.status();
    std::vector<float> z;
    ASSERT_TRUE((*scorer)->Logits(f, frames, all, &z).ok());
    ASSERT_EQ(z.size(), static_cast<size_t>(frames * k));
    for (int64_t t = 0; t < frames; ++t) {
      const float* zt = z.data() + t * k;
      const double lse = LogSumExp(zt, k);
      for (int i = 0; i < k; ++i) {
        EXPECT_NEAR(zt[i] - lse, logp[t * k + every[i]], 2e-5)
            << kind << " frame " << t << " pdf " << every[i];
      }
    }
    EXPECT_EQ((*scorer)->stats().frames, frames);
    EXPECT_EQ((*scorer)->stats().active, frames * k);
  }
}

// Sparse lists, with an empty frame and repeats: each score is the
// log-posterior plus one constant per frame, and the full layer computed
// for comparison agrees entry by entry.
TEST(LazyScorerTest, ActiveScoresDifferFromLogPosteriorsByOneConstantPerFrame) {
  const ModelSpec spec = ToyModel("dnn");
  const std::vector<float> params = InitialParams(spec, 9);
  const int64_t frames = 17;
  const int k = spec.num_classes;
  const std::vector<float> f = Features(frames, spec.feature_dim, 11);
  const std::vector<float> logp = LogPosteriors(spec, params, f, frames);
  std::mt19937 rng(2);
  ActiveOutputs active;
  for (int64_t t = 0; t < frames; ++t) {
    std::vector<int32_t> pdfs;
    if (t != 4) {
      for (int i = 0; i < 3; ++i) pdfs.push_back(rng() % k);
      pdfs.push_back(pdfs.front());
    }
    active.AddFrame(pdfs);
  }
  LazyScorerOptions o;
  o.batch_rows = 5;
  o.compare_full = true;
  auto scorer = LazyScorer::Create(spec, params, o);
  ASSERT_TRUE(scorer.ok());
  std::vector<float> z;
  ASSERT_TRUE((*scorer)->Logits(f, frames, active, &z).ok());
  ASSERT_EQ(z.size(), active.pdfs.size());
  for (int64_t t = 0; t < frames; ++t) {
    const int64_t b = active.begin[t], e = active.begin[t + 1];
    if (t == 4) {
      EXPECT_EQ(b, e);
      continue;
    }
    const double normaliser = z[b] - logp[t * k + active.pdfs[b]];
    for (int64_t i = b; i < e; ++i) {
      EXPECT_NEAR(z[i] - logp[t * k + active.pdfs[i]], normaliser, 2e-5);
    }
    EXPECT_EQ(z[b], z[e - 1]);  // the repeat
  }
  const LazyScorerStats& s = (*scorer)->stats();
  EXPECT_LT(s.max_abs_difference, 1e-5f);
  EXPECT_GE(s.max_abs_difference, 0.0f);
  EXPECT_GT(s.full_one_seconds, 0.0);
  EXPECT_GT(s.full_batch_seconds, 0.0);
  EXPECT_EQ(s.active, static_cast<int64_t>(active.pdfs.size()));
}

TEST(LazyScorerTest, RefusesWhatItCannotScore) {
  const ModelSpec dnn = ToyModel("dnn");
  const std::vector<float> params = InitialParams(dnn, 1);
  for (const char* kind : {"lstm", "blstm"}) {
    const ModelSpec spec = ToyModel(kind);
    EXPECT_EQ(LazyScorer::Create(spec, InitialParams(spec, 1), {})
                  .status()
                  .code(),
              absl::StatusCode::kInvalidArgument)
        << kind;
  }
  ModelSpec multi = dnn;
  multi.output_frames = 2;
  EXPECT_EQ(
      LazyScorer::Create(multi, InitialParams(multi, 1), {}).status().code(),
      absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(LazyScorer::Create(dnn, std::vector<float>(3), {}).status().code(),
            absl::StatusCode::kInvalidArgument);
  LazyScorerOptions bad;
  bad.batch_rows = 0;
  EXPECT_EQ(LazyScorer::Create(dnn, params, bad).status().code(),
            absl::StatusCode::kInvalidArgument);

  LazyScorerOptions o;
  o.max_frames = 4;
  auto scorer = LazyScorer::Create(dnn, params, o);
  ASSERT_TRUE(scorer.ok());
  const int dim = dnn.feature_dim;
  ActiveOutputs three;
  for (int t = 0; t < 3; ++t) three.AddFrame({0});
  std::vector<float> out;
  // Features for 2 frames, lists for 3.
  EXPECT_EQ((*scorer)->Logits(Features(2, dim, 1), 2, three, &out).code(),
            absl::StatusCode::kInvalidArgument);
  // A pdf past the classes.
  ActiveOutputs past;
  past.AddFrame({dnn.num_classes});
  EXPECT_EQ((*scorer)->Logits(Features(1, dim, 1), 1, past, &out).code(),
            absl::StatusCode::kInvalidArgument);
  // Too many frames; a size mismatch.
  ActiveOutputs five;
  for (int t = 0; t < 5; ++t) five.AddFrame({0});
  EXPECT_EQ((*scorer)->Logits(Features(5, dim, 1), 5, five, &out).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ((*scorer)->Logits(Features(2, dim, 1), 3, three, &out).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ((*scorer)->stats().frames, 0);
}

}  // namespace
}  // namespace asgd
