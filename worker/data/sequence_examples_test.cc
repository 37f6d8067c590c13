// Sequence examples: chunking, context rows, short last chunks, the
// time-major layout, and every frame labelled exactly once.
#include "worker/data/sequence_examples.h"

#include <map>

#include "gtest/gtest.h"
#include "worker/data/make_examples.h"

namespace asgd {
namespace {

// Utterances of one feature whose value is 1000 * utterance + frame, label
// = frame % 5.
Utterances Make(const std::vector<int>& lengths) {
  Utterances utts(1);
  for (size_t u = 0; u < lengths.size(); ++u) {
    std::vector<float> f;
    std::vector<int32_t> l;
    for (int t = 0; t < lengths[u]; ++t) {
      f.push_back(1000.0f * u + t);
      l.push_back(t % 5);
    }
    utts.Add(f, l);
  }
  return utts;
}

TEST(SequenceExamplesTest, ChunksWithContextAndPadding) {
  const Utterances utts = Make({7, 3});
  ChunkOptions c;
  c.chunk_frames = 4;
  c.left_context = 2;
  c.right_context = 1;
  SequenceExamples data(&utts, 0, c);
  // Utterance 0: chunks at 0 and 4; utterance 1: chunk at 0.
  ASSERT_EQ(data.num_examples(), 3);
  EXPECT_EQ(data.steps(), 7);
  EXPECT_EQ(data.labelled_frames(), 10);

  const std::vector<int64_t> ids = {1, 2};
  std::vector<float> in(2 * 7);
  std::vector<int32_t> labels(2 * 7);
  data.Fill(ids, in.data(), labels.data());
  // Example 1 (utterance 0, frames 4..6): steps cover frames 2..8, clamped.
  const float want0[7] = {2, 3, 4, 5, 6, 6, 6};
  const int32_t label0[7] = {kNoLabel, kNoLabel, 4, 0, 1, kNoLabel, kNoLabel};
  // Example 2 (utterance 1, frames 0..2): frames -2..4, clamped to 0..2.
  const float want1[7] = {1000, 1000, 1000, 1001, 1002, 1002, 1002};
  const int32_t label1[7] = {kNoLabel, kNoLabel, 0, 1, 2, kNoLabel, kNoLabel};
  for (int t = 0; t < 7; ++t) {  // time-major: row t * 2 + b
    EXPECT_EQ(in[t * 2 + 0], want0[t]) << t;
    EXPECT_EQ(labels[t * 2 + 0], label0[t]) << t;
    EXPECT_EQ(in[t * 2 + 1], want1[t]) << t;
    EXPECT_EQ(labels[t * 2 + 1], label1[t]) << t;
  }
}

TEST(SequenceExamplesTest, EveryFrameIsLabelledInExactlyOneChunk) {
  const Utterances utts = Make({13, 1, 20, 8});
  ChunkOptions c;
  c.chunk_frames = 5;
  c.left_context = 3;
  c.right_context = 2;
  SequenceExamples data(&utts, 1, c);
  std::vector<int64_t> ids(data.num_examples());
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int64_t>(i);
  const int n = static_cast<int>(ids.size()), steps = data.steps();
  std::vector<float> in(int64_t{n} * steps * data.input_dim());
  std::vector<int32_t> labels(int64_t{n} * steps);
  data.Fill(ids, in.data(), labels.data());
  std::map<float, int> times_labelled;
  for (int64_t row = 0; row < n * steps; ++row) {
    if (labels[row] == kNoLabel) continue;
    // The centre of the spliced row (context 1: 3 values) is the frame.
    ++times_labelled[in[row * 3 + 1]];
  }
  EXPECT_EQ(static_cast<int64_t>(times_labelled.size()), utts.num_frames());
  for (const auto& [frame, count] : times_labelled) EXPECT_EQ(count, 1) << frame;
}

TEST(MakeExamplesTest, PicksTheKindAndSizesBatches) {
  const Utterances utts = Make({30});
  ModelSpec dnn;
  dnn.feature_dim = 1;
  dnn.context = 2;
  auto frames = MakeExamples(dnn, &utts, DataOptions{});
  ASSERT_TRUE(frames.ok()) << frames.status();
  EXPECT_EQ((*frames)->steps(), 1);
  EXPECT_EQ((*frames)->input_dim(), 5);
  EXPECT_EQ(ShapeOfBatch(**frames, 256).rows(), 256);

  ModelSpec blstm = dnn;
  blstm.context = 0;
  LstmLayerSpec l;
  l.cells = 4;
  l.bidirectional = true;
  blstm.layers = {LayerSpec::Lstm(l)};
  DataOptions d;
  d.chunk_frames = 10;
  auto chunks = MakeExamples(blstm, &utts, d);
  ASSERT_TRUE(chunks.ok());
  EXPECT_EQ((*chunks)->steps(), 10 + 10 + 10);  // default contexts
  const BatchShape shape = ShapeOfBatch(**chunks, 256);
  EXPECT_EQ(shape.examples, 25);
  EXPECT_EQ(shape.rows(), 25 * 30);

  ModelSpec wrong = dnn;
  wrong.feature_dim = 40;
  EXPECT_EQ(MakeExamples(wrong, &utts, DataOptions{}).status().code(),
            absl::StatusCode::kFailedPrecondition);
  d.chunk_frames = 0;
  EXPECT_EQ(MakeExamples(blstm, &utts, d).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace asgd
