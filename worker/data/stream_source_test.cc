// The streaming source against the in-memory example sets it reuses: the
// same examples (frames with context, chunks), each labelled frame once per
// epoch whatever the window, minibatches across windows, the window bound,
// epochs, the end of the data, and errors.
#include "worker/data/stream_source.h"

#include <algorithm>
#include <map>
#include <numeric>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "worker/data/make_examples.h"

namespace asgd {
namespace {

// Utterances of one feature whose value is 1000 * utterance + frame, label
// frame % 7; each pass in an order drawn from (seed, pass).
class FakeStream final : public UtteranceStream {
 public:
  explicit FakeStream(std::vector<int> lengths) : lengths_(std::move(lengths)) {
    for (int n : lengths_) frames_ += n;
  }
  int feature_dim() const override { return 1; }
  void StartPass(uint64_t seed, uint64_t pass) override {
    order_.resize(lengths_.size());
    std::iota(order_.begin(), order_.end(), 0);
    std::mt19937_64 rng(seed * 31 + pass);
    std::shuffle(order_.begin(), order_.end(), rng);
    next_ = 0;
    passes.push_back(pass);
  }
  absl::StatusOr<bool> Next(std::vector<float>* features,
                            std::vector<int32_t>* labels,
                            std::vector<float>* teacher) override {
    teacher->clear();
    if (fail_after >= 0 && reads_ == fail_after) {
      return absl::InvalidArgumentError("bad utterance");
    }
    if (next_ == order_.size()) return false;
    const int u = order_[next_++];
    ++reads_;
    features->clear();
    labels->clear();
    for (int t = 0; t < lengths_[u]; ++t) {
      features->push_back(1000.0f * u + t);
      labels->push_back(t % 7);
    }
    return true;
  }
  int64_t frames_per_pass() const override { return frames_; }

  std::vector<uint64_t> passes;
  int fail_after = -1;

 private:
  std::vector<int> lengths_;
  int64_t frames_ = 0;
  std::vector<int> order_;
  size_t next_ = 0;
  int reads_ = 0;
};

// The same utterances in memory.
Utterances InMemory(const std::vector<int>& lengths) {
  Utterances utts(1);
  for (size_t u = 0; u < lengths.size(); ++u) {
    std::vector<float> f;
    std::vector<int32_t> l;
    for (int t = 0; t < lengths[u]; ++t) {
      f.push_back(1000.0f * u + t);
      l.push_back(t % 7);
    }
    utts.Add(f, l);
  }
  return utts;
}

// One example as comparable values: its rows (inputs, then the label) in
// step order.
using Example = std::vector<float>;

// The examples of a time-major batch, the labelled ones only (padding
// examples have no label at all).
std::vector<Example> ExamplesOf(const BatchBuffer& batch, int dim) {
  std::vector<Example> out;
  const int64_t heads =  // labels per row (a multi-frame model's heads)
      batch.labels.size() / (int64_t{batch.sequences} * batch.steps);
  for (int b = 0; b < batch.sequences; ++b) {
    Example e;
    bool labelled = false;
    for (int t = 0; t < batch.steps; ++t) {
      const int64_t row = int64_t{t} * batch.sequences + b;
      for (int k = 0; k < dim; ++k) e.push_back(batch.inputs[row * dim + k]);
      for (int64_t h = 0; h < heads; ++h) {
        const int32_t label = batch.labels[row * heads + h];
        e.push_back(static_cast<float>(label));
        labelled |= label != kNoLabel;
      }
    }
    if (labelled) out.push_back(std::move(e));
  }
  return out;
}

std::map<Example, int> AllExamples(const ExampleSet& set) {
  BatchBuffer batch(static_cast<int>(set.num_examples()), set.steps(),
                    set.input_dim(), set.labels_per_row());
  std::vector<int64_t> ids(set.num_examples());
  std::iota(ids.begin(), ids.end(), 0);
  set.Fill(ids, batch.inputs.data(), batch.labels.data());
  std::map<Example, int> count;
  for (Example& e : ExamplesOf(batch, set.input_dim())) ++count[e];
  return count;
}

ModelSpec FrameModel() {
  ModelSpec spec;
  spec.feature_dim = 1;
  spec.context = 2;
  spec.num_classes = 7;
  spec.layers = {LayerSpec::Dense(4, Activation::kRelu)};
  return spec;
}

ModelSpec SequenceModel() {
  ModelSpec spec = FrameModel();
  spec.context = 0;
  LstmLayerSpec l;
  l.cells = 4;
  l.bidirectional = true;
  spec.layers = {LayerSpec::Lstm(l)};
  return spec;
}

DataOptions Chunks() {
  DataOptions d;
  d.chunk_frames = 6;
  d.left_context = 3;
  d.right_context = 2;
  return d;
}

const std::vector<int> kLengths = {13, 1, 40, 8, 25, 17, 3, 30};

// Per epoch, every example of the in-memory set exactly once, for windows
// of the whole data down to about one utterance, frames (with one label and
// a multi-frame model's 3) and chunks.
TEST(StreamSourceTest, EachEpochHandsOutTheInMemoryExamplesOnce) {
  for (const int kind : {0, 1, 2}) {
    const bool sequence = kind == 1;
    ModelSpec spec = sequence ? SequenceModel() : FrameModel();
    if (kind == 2) spec.output_frames = 3;
    const DataOptions data = sequence ? Chunks() : DataOptions{};
    const Utterances utts = InMemory(kLengths);
    auto in_memory = MakeExamples(spec, &utts, data);
    ASSERT_TRUE(in_memory.ok());
    const std::map<Example, int> want = AllExamples(**in_memory);
    const BatchShape shape = ShapeOfBatch(**in_memory, 10);
    for (const int64_t window_frames : {int64_t{1000}, int64_t{45}, int64_t{20}}) {
      StreamOptions o;
      o.window_bytes = window_frames * ExampleBytesPerFrame(1);
      o.epochs = 2;
      o.seed = 3;
      auto stream = std::make_unique<FakeStream>(kLengths);
      FakeStream* fake = stream.get();
      auto source = StreamSource::Create(std::move(stream), spec, data, o);
      ASSERT_TRUE(source.ok()) << source.status();
      BatchBuffer batch(shape.examples, shape.steps, spec.input_dim(),
                        spec.output_frames);
      std::map<Example, int> seen;
      int batches = 0;
      while (true) {
        auto more = (*source)->Next(&batch);
        ASSERT_TRUE(more.ok()) << more.status();
        if (!*more) break;
        ++batches;
        for (Example& e : ExamplesOf(batch, spec.input_dim())) ++seen[e];
      }
      // Each example twice, but for fewer than a minibatch of them left at
      // the very end (dropped).
      int64_t missing = 0;
      for (const auto& [e, n] : want) {
        const int got = seen.count(e) ? seen.at(e) : 0;
        EXPECT_LE(got, 2 * n);
        EXPECT_GE(got, 2 * n - 1);
        missing += 2 * n - got;
      }
      for (const auto& [e, n] : seen) EXPECT_EQ(want.count(e), 1u);
      EXPECT_LT(missing, shape.examples)
          << "kind " << kind << " window " << window_frames;
      EXPECT_GT((*source)->epochs(), 1.9);
      const StreamStats stats = (*source)->stats();
      EXPECT_EQ(stats.passes, 2);
      EXPECT_EQ(fake->passes, (std::vector<uint64_t>{0, 1}));
      // The window holds at most its frames, except one utterance alone.
      EXPECT_LE(stats.peak_window_frames, std::max<int64_t>(window_frames, 40));
      if (window_frames < 137) {
        EXPECT_GT(stats.windows, 2);
      } else {
        EXPECT_EQ(stats.windows, 2) << "a window ends with its pass";
      }
      EXPECT_GT(batches, 0);
    }
  }
}

// Passes are epochs whatever the window: the first pass's examples all go
// out before any of the second's.
TEST(StreamSourceTest, EveryExampleOfAPassGoesOutBeforeTheNextPass) {
  const ModelSpec spec = FrameModel();
  const Utterances utts = InMemory(kLengths);
  auto in_memory = MakeExamples(spec, &utts, {});
  ASSERT_TRUE(in_memory.ok());
  const std::map<Example, int> want = AllExamples(**in_memory);
  for (const int64_t window_frames : {int64_t{1000}, int64_t{45}}) {
    StreamOptions o;
    o.window_bytes = window_frames * ExampleBytesPerFrame(1);
    o.epochs = 2;
    auto source = StreamSource::Create(std::make_unique<FakeStream>(kLengths),
                                       spec, {}, o);
    ASSERT_TRUE(source.ok());
    BatchBuffer batch(1, 1, spec.input_dim());
    for (int pass = 0; pass < 2; ++pass) {
      std::map<Example, int> seen;
      for (int i = 0; i < 137; ++i) {
        ASSERT_TRUE(*(*source)->Next(&batch));
        ++seen[ExamplesOf(batch, spec.input_dim())[0]];
      }
      EXPECT_EQ(seen, want) << "pass " << pass << " window " << window_frames;
    }
    EXPECT_FALSE(*(*source)->Next(&batch));
  }
}

// Without an epoch limit the passes go on; the order differs per pass.
TEST(StreamSourceTest, NoEpochLimitKeepsReadingPasses) {
  StreamOptions o;
  o.epochs = 0;
  o.window_bytes = 30 * ExampleBytesPerFrame(1);
  auto stream = std::make_unique<FakeStream>(kLengths);
  FakeStream* fake = stream.get();
  auto source = StreamSource::Create(std::move(stream), FrameModel(), {}, o);
  ASSERT_TRUE(source.ok());
  BatchBuffer batch(16, 1, FrameModel().input_dim());
  for (int i = 0; i < 100; ++i) {
    ASSERT_TRUE(*(*source)->Next(&batch));
  }
  EXPECT_NEAR((*source)->epochs(), 100.0 * 16 / 137, 1e-9);
  EXPECT_GE(fake->passes.size(), 11u);
}

// A fractional epoch count stops at that share of the frames; the last
// examples, too few for a minibatch, are dropped, unless the data never
// filled one: then it goes out padded with unlabelled rows.
TEST(StreamSourceTest, FractionalEpochsAndTheLastSmallMinibatch) {
  StreamOptions o;
  o.epochs = 1;
  for (const int size : {50, 200}) {
    auto source = StreamSource::Create(std::make_unique<FakeStream>(kLengths),
                                       FrameModel(), {}, o);
    ASSERT_TRUE(source.ok());
    BatchBuffer batch(size, 1, FrameModel().input_dim());
    int64_t labelled = 0, unlabelled = 0;
    while (*(*source)->Next(&batch)) {
      for (int32_t l : batch.labels) (l == kNoLabel ? unlabelled : labelled)++;
    }
    if (size == 50) {  // 2 minibatches; 37 frames left over
      EXPECT_EQ(labelled, 100);
      EXPECT_EQ(unlabelled, 0);
    } else {  // 137 frames, less than one minibatch: padded
      EXPECT_EQ(labelled, 137);
      EXPECT_EQ(unlabelled, 200 - 137);
    }
  }

  o.epochs = 0.5;
  auto source = StreamSource::Create(std::make_unique<FakeStream>(kLengths),
                                     FrameModel(), {}, o);
  ASSERT_TRUE(source.ok());
  BatchBuffer small(10, 1, FrameModel().input_dim());
  int batches = 0;
  while (*(*source)->Next(&small)) ++batches;
  EXPECT_EQ(batches, 7);  // 70 frames >= 68.5
}

TEST(StreamSourceTest, ErrorsOfTheStreamAndOfTheSetup) {
  auto stream = std::make_unique<FakeStream>(kLengths);
  stream->fail_after = 3;
  StreamOptions o;
  o.window_bytes = 10 * ExampleBytesPerFrame(1);
  auto source = StreamSource::Create(std::move(stream), FrameModel(), {}, o);
  ASSERT_TRUE(source.ok());
  BatchBuffer batch(8, 1, FrameModel().input_dim());
  absl::Status error;
  for (int i = 0; i < 50 && error.ok(); ++i) {
    error = (*source)->Next(&batch).status();
  }
  EXPECT_EQ(error.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(error.message(), "bad utterance");

  ModelSpec wide = FrameModel();
  wide.feature_dim = 40;
  EXPECT_EQ(StreamSource::Create(std::make_unique<FakeStream>(kLengths), wide,
                                 {}, o)
                .status()
                .code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(StreamSource::Create(std::make_unique<FakeStream>(std::vector<int>{}),
                                 FrameModel(), {}, o)
                .status()
                .code(),
            absl::StatusCode::kFailedPrecondition);
  // A multi-frame model's minibatch needs a label per head.
  ModelSpec multi = FrameModel();
  multi.output_frames = 2;
  auto heads = StreamSource::Create(std::make_unique<FakeStream>(kLengths),
                                    multi, {}, o);
  ASSERT_TRUE(heads.ok()) << heads.status();
  BatchBuffer one_label(8, 1, multi.input_dim());
  EXPECT_EQ((*heads)->Next(&one_label).status().code(),
            absl::StatusCode::kInvalidArgument);
  BatchBuffer two_labels(8, 1, multi.input_dim(), 2);
  EXPECT_TRUE((*heads)->Next(&two_labels).ok());

  o.window_bytes = 0;
  EXPECT_EQ(StreamSource::Create(std::make_unique<FakeStream>(kLengths),
                                 FrameModel(), {}, o)
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
}

// Teacher rows travel with their frames: utterances in memory whose frame
// value v has the teacher row (v, -v), streamed through windows that split
// minibatches, for frames and chunks: every row's teacher row is its
// centre frame's (a chunk's context rows: their nearest frame's).
TEST(StreamSourceTest, TeacherRowsTravelWithTheirFrames) {
  Utterances utts(1, /*teacher_dim=*/2);
  for (size_t u = 0; u < kLengths.size(); ++u) {
    std::vector<float> f, teacher;
    std::vector<int32_t> l;
    for (int t = 0; t < kLengths[u]; ++t) {
      const float v = 1000.0f * u + t;
      f.push_back(v);
      l.push_back(t % 7);
      teacher.insert(teacher.end(), {v, -v});
    }
    utts.Add(f, l, teacher);
  }
  // A caller's teacher span of another size never makes rows read past the
  // storage: more are cut, fewer padded with zeros.
  Utterances odd(1, 2);
  odd.Add({1, 2}, {0, 1}, {5, 6, 7, 8, 9});
  odd.Add({3}, {2}, {});
  ASSERT_EQ(odd.num_frames(), 3);
  EXPECT_EQ(std::vector<float>(odd.teacher(0), odd.teacher(0) + 6),
            (std::vector<float>{5, 6, 7, 8, 0, 0}));
  for (const bool sequence : {false, true}) {
    const ModelSpec spec = sequence ? SequenceModel() : FrameModel();
    const DataOptions data = sequence ? Chunks() : DataOptions{};
    StreamOptions o;
    o.window_bytes = 45 * ExampleBytesPerFrame(1, 2);
    o.epochs = 1;
    auto source = StreamSource::Create(std::make_unique<UtterancesStream>(&utts),
                                       spec, data, o);
    ASSERT_TRUE(source.ok()) << source.status();
    const int examples = 7;
    const int steps = sequence ? 11 : 1;
    BatchBuffer batch(examples, steps, spec.input_dim());
    const int centre = spec.context;  // the row's own frame among its context
    int rows = 0;
    while (true) {
      auto more = (*source)->Next(&batch);
      ASSERT_TRUE(more.ok()) << more.status();
      if (!*more) break;
      ASSERT_EQ(batch.teacher.size(), batch.labels.size() * 2);
      EXPECT_EQ(batch.view().teacher.size(), batch.teacher.size());
      for (size_t r = 0; r < batch.labels.size(); ++r) {
        const float v = batch.inputs[r * spec.input_dim() + centre];
        EXPECT_EQ(batch.teacher[2 * r], v) << "row " << r;
        EXPECT_EQ(batch.teacher[2 * r + 1], -v) << "row " << r;
        ++rows;
      }
    }
    EXPECT_GT(rows, 100) << sequence;
  }
}

}  // namespace
}  // namespace asgd
