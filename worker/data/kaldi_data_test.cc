// Kaldi data for the worker: loaded whole within a budget (refused beyond
// it), streamed through StreamSource to the same examples, bad data skipped
// with a report per utterance or refused through the stream.
#include "worker/data/kaldi_data.h"

#include <map>
#include <numeric>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kaldi/test_data_dir.h"
#include "worker/data/frame_examples.h"
#include "worker/data/make_examples.h"

namespace asgd {
namespace {

using kaldi::testing::TestDataDir;
using ::testing::HasSubstr;

class KaldiDataTest : public ::testing::Test {
 protected:
  void SetUp() override {
    data_ = std::make_unique<TestDataDir>(
        kaldi::testing::MakeTempDir(::testing::TempDir(), "kaldi_data"));
  }
  KaldiInput Input() const {
    KaldiInput in;
    in.data_dir = data_->dir();
    in.alignments = data_->alignments();
    in.temp_dir = ::testing::TempDir();
    return in;
  }
  int64_t Frames() const {
    int64_t n = 0;
    for (const auto& u : data_->utts()) n += u.frames();
    return n;
  }
  std::unique_ptr<TestDataDir> data_;
};

ModelSpec Spec() {
  ModelSpec spec;
  spec.feature_dim = TestDataDir::kCols;
  spec.context = 1;
  spec.num_classes = 10;
  spec.layers = {LayerSpec::Dense(4, Activation::kRelu)};
  return spec;
}

TEST_F(KaldiDataTest, LoadsWholeWithinTheBudgetAndRefusesBeyondIt) {
  data_->Write();
  const int64_t need = Frames() * ExampleBytesPerFrame(TestDataDir::kCols);
  auto loaded = LoadKaldiUtterances(Input(), 0, 1, need);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->utterances->num_frames(), Frames());
  EXPECT_EQ(loaded->utterances->num_utterances(), TestDataDir::kUtterances);
  EXPECT_EQ(loaded->num_classes, 10);
  EXPECT_EQ(loaded->frames_total, Frames());
  // feats.scp order, per-speaker CMVN (means) applied.
  const std::vector<double> want = data_->Normalised(data_->utts()[0], false);
  for (size_t k = 0; k < want.size(); ++k) {
    EXPECT_NEAR(loaded->utterances->frame(0)[k], want[k], 1e-4);
  }
  auto refused = LoadKaldiUtterances(Input(), 0, 1, need - 1);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(refused.status().message(), HasSubstr("MiB allowed"));
}

// One pass streamed gives the examples of the part loaded whole, for a
// window of a few utterances.
TEST_F(KaldiDataTest, StreamedPartGivesTheSameExamplesAsLoaded) {
  data_->Write();
  const ModelSpec spec = Spec();
  for (int part = 0; part < 2; ++part) {
    auto loaded = LoadKaldiUtterances(Input(), part, 2, int64_t{1} << 30);
    ASSERT_TRUE(loaded.ok());
    FrameExamples frames(loaded->utterances.get(), spec.context);
    std::map<std::vector<float>, int> want;
    std::vector<float> row(spec.input_dim());
    for (int64_t f = 0; f < frames.num_examples(); ++f) {
      int32_t label;
      frames.Fill({&f, 1}, row.data(), &label);
      row.push_back(static_cast<float>(label));
      ++want[row];
      row.resize(spec.input_dim());
    }
    auto stream = KaldiUtteranceStream::Open(Input(), part, 2);
    ASSERT_TRUE(stream.ok()) << stream.status();
    StreamOptions o;
    o.window_bytes = 20 * ExampleBytesPerFrame(TestDataDir::kCols);
    o.epochs = 1;
    auto source = StreamSource::Create(*std::move(stream), spec, {}, o);
    ASSERT_TRUE(source.ok()) << source.status();
    BatchBuffer batch(7, 1, spec.input_dim());
    std::map<std::vector<float>, int> seen;
    while (*(*source)->Next(&batch)) {
      for (int b = 0; b < 7; ++b) {
        if (batch.labels[b] == kNoLabel) continue;
        std::vector<float> r(batch.inputs.begin() + b * spec.input_dim(),
                             batch.inputs.begin() + (b + 1) * spec.input_dim());
        r.push_back(static_cast<float>(batch.labels[b]));
        ++seen[r];
      }
    }
    // All but fewer than a minibatch (7) left at the end.
    int64_t missing = 0;
    for (const auto& [row, n] : want) {
      const int got = seen.count(row) ? seen.at(row) : 0;
      EXPECT_LE(got, n);
      missing += n - got;
    }
    for (const auto& [row, n] : seen) EXPECT_EQ(want.count(row), 1u);
    EXPECT_LT(missing, 7) << "part " << part;
    EXPECT_GT((*source)->stats().windows, 1);
  }
}

TEST_F(KaldiDataTest, BadDataIsSkippedWithAReportOrRefusedThroughTheStream) {
  // Utterance 4: one label short of its features (found when read).
  data_->utts()[4].labels.pop_back();
  data_->Write();
  const std::string victim = data_->utts()[4].key;
  KaldiInput in = Input();
  in.policy = kaldi::BadDataPolicy::kSkip;
  std::vector<absl::Status> skipped;
  in.on_skip = [&](const absl::Status& s) { skipped.push_back(s); };
  auto stream = KaldiUtteranceStream::Open(in, 0, 1);
  ASSERT_TRUE(stream.ok());
  const KaldiUtteranceStream* raw = stream->get();
  StreamOptions o;
  o.epochs = 2;
  auto source = StreamSource::Create(*std::move(stream), Spec(), {}, o);
  ASSERT_TRUE(source.ok());
  BatchBuffer batch(16, 1, Spec().input_dim());
  int64_t labelled = 0;
  while (true) {
    auto more = (*source)->Next(&batch);
    ASSERT_TRUE(more.ok()) << more.status();
    if (!*more) break;
    for (int32_t l : batch.labels) labelled += l != kNoLabel;
  }
  const int64_t good = Frames() - data_->utts()[4].frames();
  EXPECT_EQ(labelled, (2 * good) / 16 * 16);  // whole minibatches
  ASSERT_EQ(skipped.size(), 1u);
  EXPECT_THAT(skipped[0].message(), HasSubstr(victim));
  EXPECT_EQ(raw->source().bad_data().Get(kaldi::BadDataReason::kLengthMismatch),
            1);

  in.policy = kaldi::BadDataPolicy::kRefuse;
  stream = KaldiUtteranceStream::Open(in, 0, 1);
  ASSERT_TRUE(stream.ok());
  source = StreamSource::Create(*std::move(stream), Spec(), {}, o);
  ASSERT_TRUE(source.ok());
  absl::Status error;
  while (error.ok()) {
    auto more = (*source)->Next(&batch);
    error = more.status();
    if (more.ok() && !*more) break;
  }
  EXPECT_EQ(error.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(kaldi::BadDataReasonOf(error), kaldi::BadDataReason::kLengthMismatch);
  EXPECT_THAT(error.message(), HasSubstr(victim));
}

TEST_F(KaldiDataTest, PreparesStreamedOrPooledDataAndHeldOut) {
  data_->Write();
  const ModelSpec spec = Spec();
  KaldiInput heldout = Input();  // the same directory serves as held-out
  // Streamed: the part's shape, a source per call (the first on the index
  // made here), the held-out set in memory.
  auto d = PrepareKaldiWorkerData(Input(), heldout, spec, {}, 1, 2, false);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->num_classes, 10);
  EXPECT_EQ(d->train->num_examples(), 0);
  EXPECT_EQ(d->all_frames, Frames());
  EXPECT_EQ(d->heldout->num_examples(), Frames());
  EXPECT_THAT(d->summary, HasSubstr("part 1 of 2"));
  int64_t part_frames = 0;
  for (size_t i = 1; i < data_->utts().size(); i += 2) {
    part_frames += data_->utts()[i].frames();
  }
  EXPECT_EQ(d->part_frames, part_frames);
  for (int call = 0; call < 2; ++call) {
    auto source = d->open_source(7, 1);
    ASSERT_TRUE(source.ok()) << source.status();
    BatchBuffer batch(5, 1, spec.input_dim());
    int64_t labelled = 0;
    while (*(*source)->Next(&batch)) {
      for (int32_t l : batch.labels) labelled += l != kNoLabel;
    }
    EXPECT_EQ(labelled, part_frames / 5 * 5) << "call " << call;
  }
  // The shared pool: everything in memory, or refused beyond the budget.
  d = PrepareKaldiWorkerData(Input(), KaldiInput{}, spec, {}, 1, 2, true);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->train->num_examples(), Frames());
  EXPECT_FALSE(d->open_source);
  EXPECT_EQ(d->heldout, nullptr);
  KaldiInput small = Input();
  small.memory_bytes = 2 * Frames() * ExampleBytesPerFrame(3) - 2;
  auto refused = PrepareKaldiWorkerData(small, KaldiInput{}, spec, {}, 0, 1, true);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(refused.status().message(), HasSubstr("--kaldi_memory_mb"));
  // ... the held-out set gets a quarter of the budget.
  refused = PrepareKaldiWorkerData(small, heldout, spec, {}, 0, 1, false);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(refused.status().message(), HasSubstr("held-out"));
}

// Utterances of another dimension than the model's, the first one included
// and even when they are most of the first ones: bad data, skipped (and
// reported, by name) or refused naming the first of them, in the streamed
// part, the pooled set and the held-out set alike.
TEST_F(KaldiDataTest, UtterancesOfAnotherDimensionThanTheModelsAreBadData) {
  for (int i = 0; i < 7; ++i) {
    kaldi::testing::UttSpec& u = data_->utts()[i];
    u.object = kaldi::testing::FmObject(u.rows, 4,
                                        std::vector<float>(u.rows * 4, 1.0f));
  }
  data_->Write();
  int64_t good_frames = 0;
  for (int i = 7; i < TestDataDir::kUtterances; ++i) {
    good_frames += data_->utts()[i].frames();
  }
  KaldiInput in = Input();
  in.policy = kaldi::BadDataPolicy::kSkip;
  std::vector<absl::Status> skipped;
  in.on_skip = [&](const absl::Status& s) { skipped.push_back(s); };
  for (bool pool : {false, true}) {
    skipped.clear();
    auto d = PrepareKaldiWorkerData(in, in, Spec(), {}, 0, 1, pool);
    ASSERT_TRUE(d.ok()) << d.status();
    EXPECT_EQ(d->feature_dim, TestDataDir::kCols);
    EXPECT_EQ(d->heldout->num_examples(), good_frames);
    int64_t labelled = d->train->num_examples();
    if (!pool) {
      auto source = d->open_source(1, 1);
      ASSERT_TRUE(source.ok()) << source.status();
      BatchBuffer batch(1, 1, Spec().input_dim());
      labelled = 0;
      while (true) {
        auto more = (*source)->Next(&batch);
        ASSERT_TRUE(more.ok()) << more.status();
        if (!*more) break;
        ++labelled;
      }
    }
    EXPECT_EQ(labelled, good_frames) << "pool " << pool;
    ASSERT_GE(skipped.size(), 7u);
    for (const absl::Status& s : skipped) {
      EXPECT_EQ(kaldi::BadDataReasonOf(s), kaldi::BadDataReason::kDimMismatch);
    }
    EXPECT_THAT(skipped[0].message(), HasSubstr(data_->utts()[0].key));
  }
  in.policy = kaldi::BadDataPolicy::kRefuse;
  auto loaded = LoadKaldiUtterances(
      [&] {
        KaldiInput e = in;  // as asgd_eval: the model's dimension
        e.feature_dim = Spec().feature_dim;
        return e;
      }(),
      0, 1, int64_t{1} << 30);
  EXPECT_EQ(kaldi::BadDataReasonOf(loaded.status()),
            kaldi::BadDataReason::kDimMismatch);
  EXPECT_THAT(loaded.status().message(), HasSubstr(data_->utts()[0].key));
}

TEST_F(KaldiDataTest, ClassCountOrFeaturesOtherThanTheModelsAreRefused) {
  data_->Write();
  ModelSpec spec = Spec();
  spec.num_classes = 12;
  auto d = PrepareKaldiWorkerData(Input(), KaldiInput{}, spec, {}, 0, 1, false);
  EXPECT_EQ(d.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(d.status().message(), HasSubstr("10 classes"));
  EXPECT_THAT(d.status().message(), HasSubstr("--kaldi_num_classes"));
  KaldiInput twelve = Input();
  twelve.num_classes = 12;  // as hmm-info would say
  EXPECT_TRUE(
      PrepareKaldiWorkerData(twelve, KaldiInput{}, spec, {}, 0, 1, false).ok());
  spec = Spec();
  spec.feature_dim = 40;
  d = PrepareKaldiWorkerData(Input(), KaldiInput{}, spec, {}, 0, 1, false);
  EXPECT_EQ(d.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(d.status().message(), HasSubstr("features per frame"));
}

}  // namespace
}  // namespace asgd
