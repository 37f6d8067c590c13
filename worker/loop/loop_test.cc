// The shared loop scaffold: evaluation over frames and chunks, the
// evaluation cadence on a test clock, the progress line, the learning-rate
// lookup and option checks.
#include "worker/loop/loop.h"

#include <sstream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "model/cpu_backend.h"
#include "worker/data/frame_examples.h"
#include "worker/data/sequence_examples.h"
#include "worker/data/utterances.h"
#include "worker/loop/fake_clock.h"

namespace asgd {
namespace {

using ::testing::HasSubstr;

// One feature whose sign is the label (2 classes).
Utterances Signs() {
  Utterances utts(1);
  for (int u = 0; u < 4; ++u) {
    std::vector<float> f;
    std::vector<int32_t> l;
    for (int t = 0; t < 9 + u; ++t) {
      const int label = (t + u) % 2;
      f.push_back(label == 1 ? 1.0f : -1.0f);
      l.push_back(label);
    }
    utts.Add(f, l);
  }
  return utts;
}

// A model that predicts class 1 exactly for a positive input.
ModelSpec Linear() {
  ModelSpec spec;
  spec.feature_dim = 1;
  spec.context = 0;
  spec.num_classes = 2;
  return spec;
}
std::vector<float> SignWeights() { return {-1.0f, 1.0f, 0.0f, 0.0f}; }

// A frame backend applied to every row of a batch of sequences.
class RowwiseBackend final : public ModelBackend {
 public:
  explicit RowwiseBackend(ModelBackend* frames) : frames_(frames) {}
  absl::string_view name() const override { return "rowwise"; }
  const ModelSpec& spec() const override { return frames_->spec(); }
  int max_rows() const override { return frames_->max_rows(); }
  absl::StatusOr<BatchResult> ComputeGradient(absl::Span<const float>,
                                              const Batch&,
                                              absl::Span<float>) override {
    return absl::UnimplementedError("not needed");
  }
  absl::Status LogPosteriors(absl::Span<const float>, const Batch&,
                             absl::Span<float>) override {
    return absl::UnimplementedError("not needed");
  }
  absl::Status Predict(absl::Span<const float> params, const Batch& batch,
                       absl::Span<int32_t> out) override {
    return frames_->Predict(
        params, Batch{batch.rows(), 1, batch.inputs, batch.labels}, out);
  }

 private:
  ModelBackend* const frames_;
};

TEST(EvaluateAccuracyTest, ScoresEveryLabelledFrameOnceForFramesAndChunks) {
  const Utterances utts = Signs();
  auto backend = CreateCpuBackend(Linear(), 64);
  ASSERT_TRUE(backend.ok());
  FrameExamples frames(&utts, 0);
  EXPECT_EQ(*EvaluateAccuracy(backend->get(), SignWeights(), frames, 7), 1.0);
  // No weights and a bias for class 0: always class 0, which is the label
  // of 22 of the 42 frames.
  std::vector<float> zero = {0.0f, 0.0f, 1.0f, 0.0f};
  auto half = EvaluateAccuracy(backend->get(), zero, frames, 7);
  ASSERT_TRUE(half.ok());
  EXPECT_NEAR(*half, 22.0 / 42.0, 1e-9);

  // The same frames as chunks of 4 with context rows: the same scores.
  ChunkOptions c;
  c.chunk_frames = 4;
  c.left_context = 2;
  c.right_context = 1;
  SequenceExamples chunks(&utts, 0, c);
  RowwiseBackend rowwise(backend->get());
  EXPECT_EQ(*EvaluateAccuracy(&rowwise, SignWeights(), chunks, 3), 1.0);
  EXPECT_NEAR(*EvaluateAccuracy(&rowwise, zero, chunks, 3), 22.0 / 42.0,
              1e-9);
  // A strided subset of about 8 frames.
  auto subset = EvaluateAccuracy(backend->get(), SignWeights(), frames, 7, 8);
  ASSERT_TRUE(subset.ok());
  EXPECT_EQ(*subset, 1.0);

  Utterances empty(1);
  FrameExamples none(&empty, 0);
  EXPECT_EQ(EvaluateAccuracy(backend->get(), zero, none, 7).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST(LoopReporterTest, EvaluatesOnTheClockAndLogsTheLines) {
  const Utterances utts = Signs();
  FrameExamples heldout(&utts, 0);
  auto backend = CreateCpuBackend(Linear(), 64);
  ASSERT_TRUE(backend.ok());
  FakeClock clock;
  LoopOptions o;
  o.worker_index = 3;
  o.log_every = 2;
  o.eval_every_s = 10;
  o.clock = &clock;
  std::ostringstream log;
  LoopReporter reporter(o, backend->get(), &heldout, &log);
  TrainResult result;
  BatchResult r;
  r.loss = 0.5;
  r.correct = 3;
  r.labelled = 4;
  reporter.BookStep(r, 4, PhaseTimes{}, &result);
  EXPECT_FALSE(reporter.EvalDue(result.steps));
  clock.Advance(absl::Seconds(10));
  EXPECT_TRUE(reporter.EvalDue(result.steps));
  ASSERT_TRUE(reporter.Evaluate(SignWeights(), 17, false, &result).ok());
  EXPECT_FALSE(reporter.EvalDue(result.steps));
  ASSERT_EQ(result.evals.size(), 1u);
  EXPECT_EQ(result.evals[0].accuracy, 1.0);
  EXPECT_EQ(result.evals[0].version, 17u);
  reporter.BookStep(r, 4, PhaseTimes{}, &result);
  reporter.MaybeLog(result, 0.25, " extra 1");
  EXPECT_EQ(result.frames, 8);
  EXPECT_THAT(log.str(),
              HasSubstr("worker 3 eval t=10.0 frames=4 version=17 held-out "
                        "frame accuracy: 100.0%"));
  EXPECT_THAT(log.str(), HasSubstr("worker 3 step 2 epoch 0.25 loss 0.500 "
                                   "batch-acc 75.0% frames/s 1 extra 1"));
}

// A multi-frame model's step: frames count rows, loss and accuracy its
// labelled heads.
TEST(LoopTest, AMultiFrameStepCountsFramesOnceAndScoresEveryHead) {
  const int32_t n = kNoLabel;
  const std::vector<int32_t> heads = {1, 2, 0,  3, n, n,  n, n, n,  4, 4, n};
  const std::vector<float> inputs(4);
  EXPECT_EQ(LabelledFrames(Batch{4, 1, inputs, heads}), 3);
  const std::vector<int32_t> one = {1, n, 2, 0};
  EXPECT_EQ(LabelledFrames(Batch{4, 1, inputs, one}), 3);

  auto backend = CreateCpuBackend(Linear(), 64);
  ASSERT_TRUE(backend.ok());
  FakeClock clock;
  LoopOptions o;
  o.log_every = 1;
  o.clock = &clock;
  std::ostringstream log;
  LoopReporter reporter(o, backend->get(), nullptr, &log);
  TrainResult result;
  BatchResult r;
  r.loss = 0.5;
  r.correct = 3;
  r.labelled = 6;
  clock.Advance(absl::Seconds(1));
  reporter.BookStep(r, 3, PhaseTimes{}, &result);
  reporter.MaybeLog(result, 0.5, "");
  EXPECT_EQ(result.frames, 3);
  EXPECT_THAT(log.str(), HasSubstr("batch-acc 50.0% frames/s 3"));
}

TEST(LoopTest, LearningRateAndOptionChecks) {
  EXPECT_EQ(*LocalLearningRate(0.5f, {}), 0.5f);
  EXPECT_EQ(*LocalLearningRate(0, {{"learning_rate", "0.05"}}), 0.05f);
  EXPECT_EQ(LocalLearningRate(0, {}).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(LocalLearningRate(0, {{"learning_rate", "-1"}}).status().code(),
            absl::StatusCode::kFailedPrecondition);
  LoopOptions o;
  EXPECT_TRUE(ValidateLoopOptions(o).ok());
  o.slowdown = 0.5;
  EXPECT_EQ(ValidateLoopOptions(o).code(), absl::StatusCode::kInvalidArgument);
  o.slowdown = 1;
  o.eval_frames = -1;
  EXPECT_EQ(ValidateLoopOptions(o).code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace asgd
