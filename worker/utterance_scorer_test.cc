// Whole utterances through every model kind: frame models in batches of any
// size give the same rows (to 1e-5) as one frame at a time with its context;
// sequence models run the utterance as one sequence (an LSTM's prefix is scored
// alike alone, a BLSTM's is not: it reads the future); sizes are checked.
#include "worker/utterance_scorer.h"

#include <cmath>
#include <random>

#include "gtest/gtest.h"
#include "model/cpu_backend.h"
#include "worker/data/frame_examples.h"
#include "worker/data/toy_task.h"
#include "worker/data/utterances.h"

namespace asgd {
namespace {

// How far a log-posterior may move with the batch it is computed in: BLAS
// sums a row in an order that may depend on the batch's rows, and the
// log-softmax (z - logsumexp) turns those last bits into up to ~1e-6 here
// (measured 2.4e-7). Scores of another frame differ by ~0.1.
constexpr float kBatchTolerance = 1e-5f;

std::vector<float> Features(int frames, int dim, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0, 1);
  std::vector<float> f(int64_t{frames} * dim);
  for (float& v : f) v = normal(rng);
  return f;
}

std::vector<float> Score(const ModelSpec& spec, const std::vector<float>& params,
                         const std::vector<float>& features, int frames,
                         int batch_rows = 1024) {
  ScorerOptions o;
  o.batch_rows = batch_rows;
  auto scorer = UtteranceScorer::Create(spec, params, CpuBackendFactory(), o);
  EXPECT_TRUE(scorer.ok()) << scorer.status();
  std::vector<float> out;
  EXPECT_TRUE((*scorer)->LogPosteriors(features, frames, &out).ok());
  return out;
}

TEST(UtteranceScorerTest, FrameModelsScoreEachFrameWithItsContext) {
  for (const char* kind : {"dnn", "cnn"}) {
    const ModelSpec spec = ToyModel(kind);  // context 1
    const std::vector<float> params = InitialParams(spec, 4);
    const int frames = 23, dim = spec.feature_dim, k = spec.num_classes;
    const std::vector<float> f = Features(frames, dim, 1);
    const std::vector<float> all = Score(spec, params, f, frames);
    // Rows agree to kBatchTolerance, not bit for bit: OpenBLAS may sum a row
    // in another order when the batch has another number of rows (its
    // kernels block rows; on an AMD Zen 3 the rows of a 7-row batch differ
    // from the 23-row batch's in the last bits).
    const std::vector<float> by7 = Score(spec, params, f, frames, 7);
    ASSERT_EQ(by7.size(), all.size());
    for (size_t i = 0; i < all.size(); ++i) {
      EXPECT_NEAR(by7[i], all[i], kBatchTolerance) << kind << " value " << i;
    }
    // One frame at a time, its context spliced by hand (edges repeated).
    auto backend = CreateCpuBackend(spec, 1);
    ASSERT_TRUE(backend.ok());
    for (int t = 0; t < frames; ++t) {
      std::vector<float> row;
      for (int c = -1; c <= 1; ++c) {
        const int s = std::clamp(t + c, 0, frames - 1);
        row.insert(row.end(), f.begin() + s * dim, f.begin() + (s + 1) * dim);
      }
      const int32_t label = kNoLabel;
      std::vector<float> want(k);
      ASSERT_TRUE((*backend)
                      ->LogPosteriors(params, Batch{1, 1, row, {&label, 1}},
                                      absl::MakeSpan(want))
                      .ok());
      double total = 0;
      for (int c = 0; c < k; ++c) {
        EXPECT_FLOAT_EQ(all[t * k + c], want[c]) << kind << " frame " << t;
        total += std::exp(all[t * k + c]);
      }
      EXPECT_NEAR(total, 1.0, 1e-5);
    }
  }
}

// Frame skipping: frame t has the scores the direct evaluation gives frame
// k * floor(t / k), for batches that cut the computed frames anywhere (to
// kBatchTolerance: the computed frames go through BLAS in batches of other
// sizes; a frame copied from the wrong one is off by far more).
TEST(UtteranceScorerTest, FrameSkippingCopiesTheLastComputedFrame) {
  for (const char* kind : {"dnn", "cnn"}) {
    const ModelSpec spec = ToyModel(kind);
    const std::vector<float> params = InitialParams(spec, 5);
    const int frames = 23, c = spec.num_classes;
    const std::vector<float> f = Features(frames, spec.feature_dim, 2);
    const std::vector<float> all = Score(spec, params, f, frames);
    for (int k : {2, 3, 23, 40}) {
      for (int batch_rows : {1, 4, 1024}) {
        ScorerOptions o;
        o.frame_skip = k;
        o.batch_rows = batch_rows;
        auto scorer =
            UtteranceScorer::Create(spec, params, CpuBackendFactory(), o);
        ASSERT_TRUE(scorer.ok()) << scorer.status();
        std::vector<float> out;
        ASSERT_TRUE((*scorer)->LogPosteriors(f, frames, &out).ok());
        ASSERT_EQ(out.size(), all.size());
        for (int t = 0; t < frames; ++t) {
          const int from = (t / k) * k;
          for (int j = 0; j < c; ++j) {
            ASSERT_NEAR(out[t * c + j], all[from * c + j], kBatchTolerance)
                << kind << " skip " << k << " frame " << t;
          }
        }
      }
    }
  }
}

// A multi-frame model computes every m-th frame; frame t + j takes head j
// of frame t's row, evaluated here row by row through the backend (to
// kBatchTolerance, as above).
TEST(UtteranceScorerTest, AMultiFrameModelScoresFramesByItsHeads) {
  for (const char* kind : {"dnn", "cnn"}) {
    for (int m : {2, 3}) {
      ModelSpec spec = ToyModel(kind);
      spec.output_frames = m;
      const std::vector<float> params = InitialParams(spec, 5);
      const int frames = 23, c = spec.num_classes;
      const std::vector<float> f = Features(frames, spec.feature_dim, 2);
      // Direct evaluation: each computed frame's row alone.
      Utterances utt(spec.feature_dim);
      utt.Add(f, std::vector<int32_t>(frames, 0));
      auto backend = CreateCpuBackend(spec, 1);
      ASSERT_TRUE(backend.ok()) << backend.status();
      std::vector<float> row(spec.input_dim()), direct(int64_t{m} * c);
      std::vector<std::vector<float>> heads(frames);
      for (int t = 0; t < frames; t += m) {
        SpliceFrames(utt, t, spec.context, row.data());
        ASSERT_TRUE((*backend)
                        ->LogPosteriors(params, Batch{1, 1, row, {}},
                                        absl::MakeSpan(direct))
                        .ok());
        heads[t] = direct;
      }
      for (int batch_rows : {1, 4, 1024}) {
        const std::vector<float> out =
            Score(spec, params, f, frames, batch_rows);
        ASSERT_EQ(out.size(), static_cast<size_t>(frames * c));
        for (int t = 0; t < frames; ++t) {
          const std::vector<float>& from = heads[(t / m) * m];
          for (int j = 0; j < c; ++j) {
            ASSERT_NEAR(out[t * c + j], from[(t % m) * c + j], kBatchTolerance)
                << kind << " m " << m << " frame " << t;
          }
        }
      }
      ScorerOptions skip;
      skip.frame_skip = 2;
      EXPECT_EQ(UtteranceScorer::Create(spec, params, CpuBackendFactory(), skip)
                    .status()
                    .code(),
                absl::StatusCode::kInvalidArgument);
    }
  }
}

TEST(UtteranceScorerTest, FrameSkippingIsRefusedWhereItCannotApply) {
  ScorerOptions o;
  for (int k : {0, -1, 101}) {
    o.frame_skip = k;
    const ModelSpec dnn = ToyModel("dnn");
    EXPECT_EQ(UtteranceScorer::Create(dnn, InitialParams(dnn, 1),
                                      CpuBackendFactory(), o)
                  .status()
                  .code(),
              absl::StatusCode::kInvalidArgument);
  }
  o.frame_skip = 2;
  const ModelSpec lstm = ToyModel("lstm");
  EXPECT_EQ(UtteranceScorer::Create(lstm, InitialParams(lstm, 1),
                                    CpuBackendFactory(), o)
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(UtteranceScorerTest, SequenceModelsRunTheWholeUtteranceAsOneSequence) {
  for (const char* kind : {"lstm", "blstm"}) {
    const ModelSpec spec = ToyModel(kind);
    const std::vector<float> params = InitialParams(spec, 5);
    const int frames = 40, prefix = 25, k = spec.num_classes;
    const std::vector<float> f = Features(frames, spec.feature_dim, 2);
    const std::vector<float> whole = Score(spec, params, f, frames);
    const std::vector<float> head = Score(
        spec, params,
        std::vector<float>(f.begin(), f.begin() + prefix * spec.feature_dim),
        prefix);
    float largest = 0;
    for (int i = 0; i < prefix * k; ++i) {
      largest = std::max(largest, std::abs(whole[i] - head[i]));
    }
    if (std::string(kind) == "lstm") {
      EXPECT_LT(largest, 1e-5) << "a forward LSTM does not read ahead";
    } else {
      EXPECT_GT(largest, 1e-4) << "a BLSTM's backward direction reads ahead";
    }
  }
}

TEST(UtteranceScorerTest, LongerUtterancesGrowTheBackendWithinTheLimit) {
  const ModelSpec spec = ToyModel("blstm");
  const std::vector<float> params = InitialParams(spec, 6);
  ScorerOptions o;
  o.max_frames = 500;
  auto scorer = UtteranceScorer::Create(spec, params, CpuBackendFactory(), o);
  ASSERT_TRUE(scorer.ok());
  std::vector<float> out;
  for (int frames : {10, 300, 500, 7}) {
    ASSERT_TRUE((*scorer)
                    ->LogPosteriors(Features(frames, 4, frames), frames, &out)
                    .ok())
        << frames;
    EXPECT_EQ(out.size(), static_cast<size_t>(frames * spec.num_classes));
  }
  EXPECT_EQ((*scorer)->LogPosteriors(Features(501, 4, 1), 501, &out).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ((*scorer)->LogPosteriors(Features(5, 4, 1), 6, &out).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(UtteranceScorer::Create(spec, {1.0f}, CpuBackendFactory())
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace asgd
