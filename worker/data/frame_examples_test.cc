// Frame examples: splicing, normalisation, parts, and the sampler's epochs.
#include "worker/data/frame_examples.h"

#include <set>

#include "gtest/gtest.h"
#include "worker/data/utterances.h"

namespace asgd {
namespace {

corpus::CorpusInfo Info() {
  corpus::CorpusInfo info;
  info.feature_dim = 2;
  info.num_classes = 3;
  info.mean = {1.0f, 0.0f};
  info.stddev = {2.0f, 1.0f};
  return info;
}

corpus::Utterance Utt(int frames, float base) {
  corpus::Utterance u;
  u.num_frames = frames;
  for (int t = 0; t < frames; ++t) {
    u.features.push_back(base + t);
    u.features.push_back(-(base + t));
    u.labels.push_back(t % 3);
  }
  return u;
}

TEST(FrameExamplesTest, SplicesWithEdgeRepeatAndNormalises) {
  const Utterances utts = Utterances::FromCorpus(Info(), {Utt(3, 10), Utt(2, 20)});
  FrameExamples data(&utts, /*context=*/1);
  ASSERT_EQ(data.num_examples(), 5);
  EXPECT_EQ(data.input_dim(), 6);
  std::vector<float> out(6);
  data.Splice(0, out.data());  // frames -1 (edge: 0), 0, 1 of utterance 0
  EXPECT_FLOAT_EQ(out[0], (10 - 1) / 2.0f);
  EXPECT_FLOAT_EQ(out[1], -10.0f);
  EXPECT_FLOAT_EQ(out[2], (10 - 1) / 2.0f);
  EXPECT_FLOAT_EQ(out[4], (11 - 1) / 2.0f);
  data.Splice(3, out.data());  // first frame of utterance 1: never utterance 0
  EXPECT_FLOAT_EQ(out[0], (20 - 1) / 2.0f);
  EXPECT_FLOAT_EQ(out[4], (21 - 1) / 2.0f);
  data.Splice(4, out.data());  // last frame: right edge repeats
  EXPECT_FLOAT_EQ(out[4], (21 - 1) / 2.0f);
  std::vector<float> row(6);
  int32_t label = -5;
  const int64_t id = 4;
  data.Fill({&id, 1}, row.data(), &label);
  EXPECT_EQ(row, out);
  EXPECT_EQ(label, 1);
}

TEST(FrameExamplesTest, AMultiFrameRowHasTheNextFramesLabels) {
  corpus::Utterance a = Utt(4, 10), b = Utt(2, 20);
  a.labels = {0, 1, 2, 1};
  b.labels = {2, 0};
  const Utterances utts = Utterances::FromCorpus(Info(), {a, b});
  FrameExamples data(&utts, /*context=*/1, /*output_frames=*/3);
  EXPECT_EQ(data.labels_per_row(), 3);
  EXPECT_EQ(data.num_examples(), 6);
  const std::vector<int64_t> ids = {0, 2, 3, 4, 5};
  std::vector<float> rows(ids.size() * data.input_dim());
  std::vector<int32_t> labels(ids.size() * 3, -5);
  data.Fill(ids, rows.data(), labels.data());
  const std::vector<int32_t> want = {
      0, 1, 2,                    // frame 0: frames 0, 1, 2
      2, 1, kNoLabel,             // frame 2: the utterance ends after 3
      1, kNoLabel, kNoLabel,      // frame 3, its last
      2, 0, kNoLabel,             // utterance 1 never takes utterance 0's
      0, kNoLabel, kNoLabel};
  EXPECT_EQ(labels, want);
  // The inputs are those of one-frame examples.
  FrameExamples single(&utts, /*context=*/1);
  std::vector<float> single_rows(rows.size());
  std::vector<int32_t> single_labels(ids.size());
  single.Fill(ids, single_rows.data(), single_labels.data());
  EXPECT_EQ(rows, single_rows);
  EXPECT_EQ(single_labels, (std::vector<int32_t>{0, 2, 1, 2, 0}));
}

TEST(FrameExamplesTest, PartsSplitUtterancesDisjointly) {
  std::vector<corpus::Utterance> utts;
  for (int i = 0; i < 5; ++i) utts.push_back(Utt(i + 1, i * 100));
  const Utterances a = Utterances::FromCorpus(Info(), utts, 0, 2);
  const Utterances b = Utterances::FromCorpus(Info(), utts, 1, 2);
  EXPECT_EQ(a.num_frames(), 1 + 3 + 5);
  EXPECT_EQ(b.num_frames(), 2 + 4);
  EXPECT_EQ(a.num_utterances(), 3);
}

TEST(ExampleSamplerTest, EachEpochVisitsEveryExampleOnce) {
  const Utterances utts = Utterances::FromCorpus(Info(), {Utt(7, 0), Utt(5, 100)});
  FrameExamples data(&utts, 0);
  ExampleSampler sampler(&data, 3);
  BatchBuffer batch(12, 1, 2);
  sampler.Next(&batch);
  std::set<float> seen;
  for (int i = 0; i < 12; ++i) seen.insert(batch.inputs[2 * i + 1]);
  EXPECT_EQ(seen.size(), 12u);
  EXPECT_DOUBLE_EQ(sampler.epochs(), 1.0);
}

TEST(EpochOrderTest, IsAPermutationFixedBySeedAndEpoch) {
  const std::vector<int64_t> a = EpochOrder(50, 7, 2);
  EXPECT_EQ(a, EpochOrder(50, 7, 2));
  EXPECT_NE(a, EpochOrder(50, 7, 3));
  std::set<int64_t> all(a.begin(), a.end());
  EXPECT_EQ(all.size(), 50u);
  EXPECT_EQ(*all.rbegin(), 49);
}

}  // namespace
}  // namespace asgd
