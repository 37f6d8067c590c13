// ResidentPush without a network: a 1-bit push is the backend's encoding
// cut per server as the client's encoder plans it, and the part a server
// did not apply goes back into the backend's residual, the applied part
// does not; a bfloat16 push is the backend's rounded average in the
// encoder's float chunks; float32 pushes go through the client's Push with
// the average.
#include "worker/ps/resident_push.h"

#include <cmath>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/wire_codec.h"
#include "compression/grad_codec.h"
#include "gtest/gtest.h"
#include "model/cpu_backend.h"
#include "worker/ps/push_encoder.h"

namespace asgd {
namespace {

ModelSpec Spec() {
  ModelSpec spec;
  spec.feature_dim = 5;
  spec.context = 1;  // 15 inputs
  spec.layers = {LayerSpec::Dense(12, Activation::kRelu)};
  spec.num_classes = 4;
  return spec;
}

// Two servers; server 1 drops every push as too stale.
class FakeClient final : public ParamClient {
 public:
  FakeClient(const ModelSpec& spec, std::optional<PushEncoding> encoding)
      : spec_(spec),
        layout_(*ModelLayout::Create(ModelTensors(spec), 2, 1)) {
    PushEncoderOptions o;
    o.push_encoding = encoding;
    o.max_chunk_elements = 50;
    o.compressed_chunk_elements = 37;  // chunks that cut rows
    encoder_ = *PushEncoder::Create(layout_, o);
  }
  const ModelLayout& layout() const override { return layout_; }
  const ModelSpec& model() const override { return spec_; }
  const std::map<std::string, std::string>& attributes() const override {
    return attributes_;
  }
  const PushEncoder* push_encoder() const override { return encoder_.get(); }
  PushEncoder& encoder() { return *encoder_; }
  absl::Status Pull(PullSink*, std::vector<uint64_t>*) override {
    return absl::UnimplementedError("no pulls here");
  }
  std::vector<absl::StatusOr<ServerPushReply>> PushEncoded(
      const std::vector<ServerPush>& parts, const std::vector<uint64_t>&,
      int) override {
    sent = parts;
    ServerPushReply applied, dropped;
    applied.applied = true;
    dropped.applied = false;
    dropped.staleness = 9;
    return {applied, dropped};
  }
  absl::StatusOr<PushOutcome> Push(absl::Span<const float> gradient,
                                   const std::vector<uint64_t>&, int,
                                   PushKind) override {
    float_push.assign(gradient.begin(), gradient.end());
    PushOutcome o;
    o.applied = 2;
    return o;
  }
  absl::StatusOr<std::vector<uint64_t>> Versions() override {
    return std::vector<uint64_t>{0, 0};
  }
  absl::StatusOr<PoolGrant> FetchBatches(const std::string&, uint64_t, int,
                                         double, int) override {
    return absl::UnimplementedError("no pool here");
  }

  std::vector<ServerPush> sent;
  std::vector<float> float_push;

 private:
  ModelSpec spec_;
  ModelLayout layout_;
  std::map<std::string, std::string> attributes_;
  std::unique_ptr<PushEncoder> encoder_;
};

// A CPU backend with the model of seed 3 loaded, and one batch.
class ResidentPushTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto backend = CreateCpuBackend(spec_, 8);
    ASSERT_TRUE(backend.ok());
    backend_ = *std::move(backend);
    ASSERT_TRUE(backend_->LoadModel(InitialParams(spec_, 3)).ok());
    const int rows = 6;
    inputs_.resize(rows * spec_.input_dim());
    for (size_t i = 0; i < inputs_.size(); ++i) {
      inputs_[i] = std::sin(0.7f * static_cast<float>(i));
    }
    for (int r = 0; r < rows; ++r) labels_.push_back(r % spec_.num_classes);
    batch_ = Batch{rows, 1, inputs_, labels_};
  }

  // The average of the same gradient, from a twin of the backend.
  void TwinAverage(std::vector<float>* average) {
    average->resize(ModelParamCount(spec_));
    auto twin = CreateCpuBackend(spec_, 8);
    ASSERT_TRUE(twin.ok());
    ASSERT_TRUE((*twin)->LoadModel(InitialParams(spec_, 3)).ok());
    ASSERT_TRUE((*twin)->AccumulateGradient(batch_).ok());
    ASSERT_TRUE((*twin)->TakeAverage(absl::MakeSpan(*average)).ok());
  }

  // The batch accumulated on the backend (*average: its average, from a
  // twin), taken by `push` (which must encode on the backend) and sent to
  // both servers: server 0 applies it.
  void PushOneBatch(FakeClient* client, ResidentPush* push,
                    std::vector<float>* average, PushOutcome* outcome) {
    ASSERT_TRUE(backend_->AccumulateGradient(batch_).ok());
    ASSERT_NO_FATAL_FAILURE(TwinAverage(average));
    ASSERT_TRUE(push->encodes());
    ASSERT_TRUE(push->Take(1).ok());
    EXPECT_EQ(backend_->accumulated(), 0);
    auto sent = push->Send({4, 5}, 1);
    ASSERT_TRUE(sent.ok()) << sent.status();
    EXPECT_EQ(sent->applied, 1);
    ASSERT_EQ(client->sent.size(), 2u);
    *outcome = *sent;
  }

  const ModelSpec spec_ = Spec();
  std::unique_ptr<ModelBackend> backend_;
  std::vector<float> inputs_;
  std::vector<int32_t> labels_;
  Batch batch_;
};

TEST_F(ResidentPushTest, WhatAServerDidNotApplyGoesBackIntoTheResidual) {
  const ModelSpec& spec = spec_;
  FakeClient client(spec, PushEncoding::kOneBit);
  ModelBackend& b = *backend_;
  const int64_t n = client.layout().total_size();
  std::vector<float> average;
  ResidentPush push(&b, &client);
  PushOutcome outcome;
  ASSERT_NO_FATAL_FAILURE(PushOneBatch(&client, &push, &average, &outcome));
  EXPECT_EQ(outcome.dropped, 1);
  EXPECT_EQ(outcome.max_staleness, 9u);
  // Each server's part covers its range with the encoder's chunks.
  for (int s = 0; s < 2; ++s) {
    const FlatRange range = client.layout().ServerRange(s);
    int64_t at = range.begin;
    for (const EncodedChunk& c : client.sent[s].chunks) {
      EXPECT_EQ(c.ref.flat_begin, at);
      std::vector<float> decoded(c.ref.count);
      ASSERT_TRUE(DecodeCompressedChunk(c.bytes, CodecLimits(),
                                        absl::MakeSpan(decoded))
                      .ok());
      at += c.ref.count;
    }
    EXPECT_EQ(at, range.end);
  }
  ASSERT_TRUE(push.Restore().ok());
  std::vector<float> residual(n);
  ASSERT_TRUE(b.ReadResidual(absl::MakeSpan(residual)).ok());
  // Server 0 applied: its residual is what the encoding lost. Server 1 did
  // not: its residual is the whole average again (lost + decoded).
  const FlatRange dropped = client.layout().ServerRange(1);
  int64_t lost_nonzero = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (i >= dropped.begin) {
      EXPECT_NEAR(residual[i], average[i], 1e-6 * (1 + std::fabs(average[i])))
          << i;
    } else {
      lost_nonzero += residual[i] != 0.0f && residual[i] != average[i];
    }
  }
  EXPECT_GT(lost_nonzero, 0);
}

TEST_F(ResidentPushTest, TopKPushesAreTheHostEncodersAndComeBackWhenDropped) {
  FakeClient client(spec_, PushEncoding::kTopK);
  ModelBackend& b = *backend_;
  const int64_t n = client.layout().total_size();
  std::vector<float> average;
  ResidentPush push(&b, &client);
  PushOutcome outcome;
  ASSERT_NO_FATAL_FAILURE(PushOneBatch(&client, &push, &average, &outcome));
  // Each server's part is what a host push of the average sends: the same
  // chunks, the same entries, byte for byte.
  FakeClient host(spec_, PushEncoding::kTopK);
  PushEncoder& encoder = host.encoder();
  int64_t sent_by_0 = 0;
  for (int s = 0; s < 2; ++s) {
    auto want = encoder.Encode(s, average, PushKind::kGradient);
    ASSERT_TRUE(want.ok()) << want.status();
    EXPECT_EQ(client.sent[s].encoding, PushEncoding::kTopK);
    ASSERT_EQ(client.sent[s].chunks.size(), want->chunks.size());
    for (size_t c = 0; c < want->chunks.size(); ++c) {
      EXPECT_EQ(client.sent[s].chunks[c].ref.flat_begin,
                want->chunks[c].ref.flat_begin);
      EXPECT_EQ(client.sent[s].chunks[c].bytes, want->chunks[c].bytes)
          << "server " << s << " chunk " << c;
      if (s == 0) {
        sent_by_0 += TopKCount(0.01, want->chunks[c].ref.count);
      }
    }
  }
  ASSERT_TRUE(push.Restore().ok());
  std::vector<float> residual(n);
  ASSERT_TRUE(b.ReadResidual(absl::MakeSpan(residual)).ok());
  // Server 0 applied: its sent entries left the residual, the rest stayed.
  // Server 1 did not: its residual is the whole average again.
  const FlatRange dropped = client.layout().ServerRange(1);
  int64_t zeros = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (i < dropped.begin && residual[i] == 0.0f && average[i] != 0.0f) {
      ++zeros;  // sent (the largest entries: none of them is zero)
    } else {
      ASSERT_EQ(residual[i], average[i]) << i;
    }
  }
  EXPECT_EQ(zeros, sent_by_0);
}

TEST_F(ResidentPushTest, FloatPushesSendTheAverageThroughTheClient) {
  const ModelSpec& spec = spec_;
  const Batch& batch = batch_;
  FakeClient client(spec, std::nullopt);
  ModelBackend& b = *backend_;
  ASSERT_TRUE(b.AccumulateGradient(batch).ok());
  ASSERT_TRUE(b.AccumulateGradient(batch).ok());
  ResidentPush push(&b, &client);
  EXPECT_FALSE(push.encodes());
  ASSERT_TRUE(push.Take(2).ok());
  auto outcome = push.Send({0, 0}, 2);
  ASSERT_TRUE(outcome.ok());
  EXPECT_EQ(outcome->applied, 2);
  std::vector<float> grad(client.layout().total_size());
  ASSERT_TRUE(b.ComputeGradient(InitialParams(spec, 3), batch,
                                absl::MakeSpan(grad))
                  .ok());
  ASSERT_EQ(client.float_push.size(), grad.size());
  for (size_t i = 0; i < grad.size(); ++i) {
    EXPECT_EQ(client.float_push[i], (grad[i] + grad[i]) * 0.5f) << i;
  }
  EXPECT_TRUE(push.Restore().ok());  // nothing to restore
}

// A bfloat16 push is the backend's TakeBf16 (the average rounded as the
// wire rounds it), cut per server into the chunks the client's encoder
// plans for a host gradient, each a view of the rounded values; nothing is
// restored for a server that did not apply it.
TEST_F(ResidentPushTest, Bf16PushesAreTheBackendsRoundedAverage) {
  const ModelSpec& spec = spec_;
  const Batch& batch = batch_;
  FakeClient client(spec, PushEncoding::kBfloat16);
  ModelBackend& b = *backend_;
  ASSERT_TRUE(b.AccumulateGradient(batch).ok());
  ASSERT_TRUE(b.AccumulateGradient(batch).ok());
  ResidentPush push(&b, &client);
  EXPECT_TRUE(push.encodes());
  ASSERT_TRUE(push.Take(2).ok());
  EXPECT_EQ(b.accumulated(), 0);
  auto outcome = push.Send({0, 0}, 2);
  ASSERT_TRUE(outcome.ok());
  EXPECT_TRUE(client.float_push.empty());
  std::vector<float> grad(client.layout().total_size());
  ASSERT_TRUE(b.ComputeGradient(InitialParams(spec, 3), batch,
                                absl::MakeSpan(grad))
                  .ok());
  // What the host path would send: each server's float chunks of the
  // average, rounded by the wire codec.
  ASSERT_EQ(client.sent.size(), 2u);
  std::vector<float> average(grad.size());
  for (size_t i = 0; i < grad.size(); ++i) {
    average[i] = (grad[i] + grad[i]) * 0.5f;
  }
  int64_t covered = 0;
  for (int s = 0; s < 2; ++s) {
    const ServerPush& got = client.sent[s];
    const ServerPush want =
        client.push_encoder()->EncodeUncompressed(s, average,
                                                  PushKind::kGradient);
    EXPECT_EQ(got.encoding, PushEncoding::kBfloat16);
    EXPECT_EQ(got.kind, PushKind::kGradient);
    ASSERT_EQ(got.chunks.size(), want.chunks.size());
    for (size_t k = 0; k < got.chunks.size(); ++k) {
      const EncodedChunk& c = got.chunks[k];
      EXPECT_EQ(c.ref.flat_begin, want.chunks[k].ref.flat_begin);
      ASSERT_EQ(c.ref.count, want.chunks[k].ref.count);
      ASSERT_EQ(static_cast<int64_t>(c.bf16.size()), c.ref.count);
      EXPECT_TRUE(c.values.empty());
      EXPECT_EQ(got.data_bytes(c), 2 * c.ref.count);
      for (int64_t i = 0; i < c.ref.count; ++i) {
        ASSERT_EQ(c.bf16[i], FloatToBf16(average[c.ref.flat_begin + i]))
            << c.ref.flat_begin + i;
      }
      covered += c.ref.count;
    }
  }
  EXPECT_EQ(covered, static_cast<int64_t>(grad.size()));
  std::vector<float> residual(grad.size(), -1.0f);
  EXPECT_TRUE(push.Restore().ok());
  ASSERT_TRUE(b.ReadResidual(absl::MakeSpan(residual)).ok());
  for (float r : residual) ASSERT_EQ(r, 0.0f);
  // A plan for another model size is refused.
  EXPECT_EQ(client.push_encoder()
                ->SplitBf16(std::vector<uint16_t>(3))
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace asgd
