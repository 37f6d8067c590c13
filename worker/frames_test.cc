#include "worker/frames.h"

#include <set>

#include "gtest/gtest.h"

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

TEST(FrameDataTest, SplicesWithEdgeRepeatAndNormalises) {
  FrameData data(Info(), {Utt(3, 10), Utt(2, 20)}, /*context=*/1);
  ASSERT_EQ(data.num_frames(), 5);
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
  EXPECT_EQ(data.label(4), 1);
}

TEST(FrameDataTest, PartsSplitUtterancesDisjointly) {
  std::vector<corpus::Utterance> utts;
  for (int i = 0; i < 5; ++i) utts.push_back(Utt(i + 1, i * 100));
  FrameData a(Info(), utts, 0, 0, 2), b(Info(), utts, 0, 1, 2);
  EXPECT_EQ(a.num_frames(), 1 + 3 + 5);
  EXPECT_EQ(b.num_frames(), 2 + 4);
}

TEST(MinibatchSamplerTest, EachEpochVisitsEveryFrameOnce) {
  std::vector<corpus::Utterance> utts = {Utt(7, 0), Utt(5, 100)};
  FrameData data(Info(), utts, 0);
  MinibatchSampler sampler(&data, 3);
  std::vector<float> in(12 * 2);
  std::vector<int32_t> labels(12);
  sampler.Next(12, absl::MakeSpan(in), absl::MakeSpan(labels));
  std::set<float> seen;
  for (int i = 0; i < 12; ++i) seen.insert(in[2 * i + 1]);
  EXPECT_EQ(seen.size(), 12u);
  EXPECT_DOUBLE_EQ(sampler.epochs(), 1.0);
}

}  // namespace
}  // namespace asgd
