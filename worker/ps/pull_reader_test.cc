// PullReader without any transport: the three forms of a pull reply
// (weights, exact weights, base + updates) into a sink, and malformed
// sequences refused with DataLoss or InvalidArgument, nothing committed and
// the delta copy lost.
#include "worker/ps/pull_reader.h"

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "common/wire_codec.h"
#include "compression/grad_codec.h"
#include "gtest/gtest.h"
#include "worker/ps/pull_sink.h"

namespace asgd {
namespace {

constexpr int64_t kSize = 48;  // one tensor of 6 x 8, one server

// A host sink that counts commits.
class CountingSink : public PullSink {
 public:
  explicit CountingSink(std::vector<float>* params) : host_(absl::MakeSpan(*params)) {}
  int64_t size() const override { return host_.size(); }
  absl::Span<float> Staging(FlatRange range) override {
    return host_.Staging(range);
  }
  absl::Status Commit(FlatRange range) override {
    ++commits;
    return host_.Commit(range);
  }
  int commits = 0;

 private:
  HostPullSink host_;
};

class PullReaderTest : public ::testing::Test {
 protected:
  PullReaderTest()
      : layout_(*ModelLayout::Create({{"w", {6, 8}}}, 1, 1)),
        range_(layout_.ServerRange(0)),
        params_(kSize, -1.0f),
        sink_(&params_) {
    weights_.resize(kSize);
    for (int64_t i = 0; i < kSize; ++i) weights_[i] = 0.01f * (i - 20);
    bytes_.assign(reinterpret_cast<const char*>(weights_.data()),
                  kSize * sizeof(float));
    copy_.max_compressed_elements = 1 << 20;
  }

  // Weight chunk `i` (16 floats) of weights_ at `version`.
  PullMessage WeightChunk(int i, uint64_t version, bool exact = false) {
    PullMessage m;
    m.model_version = version;
    m.exact = exact;
    m.has_chunk = true;
    m.chunk.tensor = "w";
    m.chunk.offset = 16 * i;
    m.chunk.dtype = static_cast<int>(WireDtype::kFloat32);
    m.chunk.data.push_back(
        absl::string_view(bytes_).substr(16 * i * sizeof(float),
                                         16 * sizeof(float)));
    return m;
  }
  static PullMessage End(uint64_t version, uint64_t chunks, bool exact = false,
                         uint64_t lineage = 0) {
    PullMessage m;
    m.model_version = version;
    m.end_of_pull = true;
    m.num_chunks = chunks;
    m.exact = exact;
    m.lineage = lineage;
    return m;
  }

  PullReader Reader(bool delta, std::optional<uint64_t> held = std::nullopt) {
    return PullReader(&layout_, range_, 16, sink_.Staging(range_),
                      delta ? &copy_ : nullptr, held);
  }

  // Reads `msgs`; the first error, or the version after Finish and Commit.
  absl::StatusOr<uint64_t> Read(PullReader& reader,
                                const std::vector<PullMessage>& msgs) {
    for (const PullMessage& m : msgs) {
      absl::Status s = reader.Add(m);
      if (!s.ok()) return s;
    }
    absl::StatusOr<uint64_t> v = reader.Finish();
    if (v.ok()) {
      absl::Status s = sink_.Commit(range_);
      if (!s.ok()) return s;
    }
    return v;
  }

  ModelLayout layout_;
  FlatRange range_;
  std::vector<float> params_;
  CountingSink sink_;
  std::vector<float> weights_;
  std::string bytes_;
  DeltaCopy copy_;
};

TEST_F(PullReaderTest, WeightsForm) {
  PullReader reader = Reader(/*delta=*/false);
  auto v = Read(reader, {WeightChunk(0, 5), WeightChunk(1, 5),
                         WeightChunk(2, 5), End(5, 3)});
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(*v, 5u);
  EXPECT_FALSE(reader.exact());
  EXPECT_EQ(params_, weights_);
  EXPECT_EQ(sink_.commits, 1);
}

TEST_F(PullReaderTest, ExactWeightsFormMakesTheCopyExact) {
  const std::optional<uint64_t> held = copy_.BeginDelta(range_);
  EXPECT_FALSE(held.has_value());
  PullReader reader = Reader(/*delta=*/true, held);
  auto v = Read(reader, {WeightChunk(0, 9, true), WeightChunk(1, 9, true),
                         WeightChunk(2, 9, true), End(9, 3, true, 77)});
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_TRUE(reader.exact());
  EXPECT_TRUE(reader.received_weights());
  EXPECT_EQ(copy_.version, std::optional<uint64_t>(9));
  EXPECT_EQ(copy_.lineage, 77u);
  EXPECT_EQ(copy_.values, weights_);
  EXPECT_EQ(params_, weights_);
}

TEST_F(PullReaderTest, BasePlusUpdatesReplaysOnTheCopy) {
  copy_.values = weights_;
  copy_.version = 7;
  copy_.lineage = 3;
  const std::optional<uint64_t> held = copy_.BeginDelta(range_);
  ASSERT_EQ(held, std::optional<uint64_t>(7));
  EXPECT_FALSE(copy_.version.has_value());  // lost until the reply completes
  // One one-bit update of the whole slice, learning rate 0.1.
  std::vector<float> g(kSize), residual(kSize, 0.0f), decoded(kSize);
  for (int64_t i = 0; i < kSize; ++i) g[i] = std::sin(0.7f * i);
  std::string update;
  ASSERT_TRUE(EncodeOneBit(g, 8, 8, absl::MakeSpan(residual), &update).ok());
  ASSERT_TRUE(DecodeCompressedChunk(update, CodecLimits{},
                                    absl::MakeSpan(decoded))
                  .ok());
  PullMessage header;
  header.model_version = 8;
  header.exact = true;
  header.has_update = true;
  header.update.set_version(8);
  header.update.set_learning_rate(0.1f);
  header.update.set_num_chunks(1);
  PullMessage chunk;
  chunk.model_version = 8;
  chunk.exact = true;
  chunk.has_chunk = true;
  chunk.chunk.dtype = static_cast<int>(PushEncoding::kOneBit);
  chunk.chunk.data.push_back(update);
  PullReader reader = Reader(/*delta=*/true, held);
  auto v = Read(reader, {header, chunk, End(8, 1, true, 3)});
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_FALSE(reader.received_weights());
  EXPECT_EQ(reader.update_bytes(), static_cast<int64_t>(update.size()));
  EXPECT_EQ(copy_.version, std::optional<uint64_t>(8));
  for (int64_t i = 0; i < kSize; ++i) {
    EXPECT_EQ(params_[i], weights_[i] - 0.1f * decoded[i]) << i;
  }
}

TEST_F(PullReaderTest, MalformedRepliesAreRefusedAndNothingIsCommitted) {
  struct Case {
    const char* what;
    bool delta;
    std::vector<PullMessage> msgs;
  };
  PullMessage chunkless;
  chunkless.model_version = 5;
  PullMessage bad_tensor = WeightChunk(0, 5);
  bad_tensor.chunk.tensor = "nope";
  const std::vector<Case> cases = {
      {"versions differ", false, {WeightChunk(0, 5), WeightChunk(1, 6)}},
      {"exact without being asked", false, {WeightChunk(0, 5, true)}},
      {"exact and plain mixed", true,
       {WeightChunk(0, 5, true), WeightChunk(1, 5)}},
      {"a message without a chunk", false, {chunkless}},
      {"fewer chunks than declared", false,
       {WeightChunk(0, 5), WeightChunk(1, 5), End(5, 3)}},
      {"a message after the end", false,
       {WeightChunk(0, 5), WeightChunk(1, 5), WeightChunk(2, 5), End(5, 3),
        WeightChunk(0, 5)}},
      {"an unknown tensor", false, {bad_tensor}},
      {"chunks that do not tile the slice", false,
       {WeightChunk(0, 5), WeightChunk(2, 5), End(5, 2)}},
      {"an exact reply that is not complete", true,
       {WeightChunk(0, 5, true), End(5, 1, true)}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    copy_.values = weights_;
    copy_.version = 4;
    const std::optional<uint64_t> held = copy_.BeginDelta(range_);
    PullReader reader = Reader(c.delta, c.delta ? held : std::nullopt);
    absl::StatusOr<uint64_t> v = Read(reader, c.msgs);
    ASSERT_FALSE(v.ok());
    EXPECT_TRUE(v.status().code() == absl::StatusCode::kDataLoss ||
                v.status().code() == absl::StatusCode::kInvalidArgument)
        << v.status();
    EXPECT_EQ(sink_.commits, 0);
    EXPECT_FALSE(copy_.version.has_value());
    // The reader refuses everything after an error.
    EXPECT_FALSE(reader.Add(End(5, 3)).ok());
    EXPECT_FALSE(reader.Finish().ok());
  }
}

TEST_F(PullReaderTest, NonFiniteWeightsSayTrainingDiverged) {
  weights_[3] = std::numeric_limits<float>::infinity();
  bytes_.assign(reinterpret_cast<const char*>(weights_.data()),
                kSize * sizeof(float));
  PullReader reader = Reader(/*delta=*/false);
  auto v = Read(reader, {WeightChunk(0, 5)});
  EXPECT_EQ(v.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(sink_.commits, 0);
}

}  // namespace
}  // namespace asgd
