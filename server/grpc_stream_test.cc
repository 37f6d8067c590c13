// The long-lived PushStream and PullStream, and compressed pushes, over a
// real gRPC connection to a server on port 0, with test-sized limits: many
// pushes and pulls per stream, each push applied exactly as sent (float
//32, 1-bit, top-k), every invalid push refused with the stream ended and
// nothing applied, the progress deadline per push (not between pushes), the
// idle timeout, the per-address cap, and shutdown ending idle streams.
#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "common/chunking.h"
#include "common/tensor_messages.h"
#include "common/wire_codec.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "model/model_spec.h"
#include "prometheus/registry.h"
#include "proto/asgd.grpc.pb.h"
#include "server/grpc_server.h"
#include "server/manual_clock.h"
#include "server/model_options.h"
#include "server/push_test_cases.h"
#include "server/server_metrics.h"

namespace asgd {
namespace {

using asgd::v1::PullChunk;
using asgd::v1::PullRequest;
using asgd::v1::PushChunk;
using asgd::v1::PushReply;

constexpr int64_t kChunk = 64;  // elements per chunk: many chunks per push

class StreamTest : public ::testing::Test {
 protected:
  // Starts the server (server 0 of 2, 2 shards, SGD with learning rate 0.5).
  void Start(GrpcServiceOptions service = {}, bool compressed = true,
             int admm_slots = 0) {
    ParamStoreOptions o;
    SetModel(PushTestSpec(), &o);
    o.num_servers = 2;
    o.server_index = 0;
    o.num_shards = 2;
    o.optimizer.learning_rate = 0.5f;
    o.max_chunk_elements = kChunk;
    o.compressed_pushes = compressed;
    o.admm_slots = admm_slots;
    metrics_ = std::make_unique<ServerMetrics>(registry_, 0, 2);
    auto server = GrpcServer::Start(o, InitialParams(PushTestSpec(), 1),
                                    "127.0.0.1", 0, metrics_.get(), {},
                                    nullptr, service);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    stub_ = asgd::v1::ParameterServer::NewStub(grpc::CreateChannel(
        server_->local_address(), grpc::InsecureChannelCredentials()));
  }

  ParamStore* store() { return server_->store(); }

  std::vector<PushChunk> FloatPush(float value, uint64_t version) {
    return FloatPushMessages(store()->layout(), store()->range(), kChunk,
                             value, version);
  }
  std::vector<PushChunk> CompressedPush(PushEncoding encoding,
                                        uint64_t version,
                                        std::vector<float>* decoded) {
    return CompressedPushMessages(store()->layout(), store()->range(), kChunk,
                                  encoding, 0.5f, version, decoded);
  }

  uint64_t Rejected(RejectReason r) {
    return store()->stats().rejected[static_cast<int>(r)];
  }

  // The value of a counter series of this server's metrics (0 if absent).
  double Counter(const std::string& name, const std::string& label,
                 const std::string& value) {
    for (const auto& family : registry_.Collect()) {
      if (family.name != name) continue;
      for (const auto& metric : family.metric) {
        for (const auto& l : metric.label) {
          if (l.name == label && l.value == value) return metric.counter.value;
        }
      }
    }
    return 0;
  }

  // Waits (bounded) until `n` push streams or calls are admitted.
  bool AwaitPushesInFlight(int n) {
    const absl::Time deadline = absl::Now() + absl::Seconds(30);
    while (server_->service()->pushes_in_flight() != n) {
      if (absl::Now() > deadline) return false;
      absl::SleepFor(absl::Milliseconds(5));  // polling a condition, bounded
    }
    return true;
  }

  // Waits (bounded) until `watchdog` watches `n` streams.
  static bool AwaitWatched(StreamWatchdog* watchdog, int n) {
    const absl::Time deadline = absl::Now() + absl::Seconds(30);
    while (watchdog->watched() != n) {
      if (absl::Now() > deadline) return false;
      absl::SleepFor(absl::Milliseconds(5));  // polling a condition, bounded
    }
    return true;
  }

  // Moves the manual clock on by `timeout` and polls `watchdog` until it
  // expired `n` streams in all (bounded): a message still on its way when
  // the clock moves counts as progress at the new time.
  bool ExpireAfter(StreamWatchdog* watchdog, absl::Duration timeout, int n) {
    const absl::Time deadline = absl::Now() + absl::Seconds(30);
    int expired = 0;
    while (expired < n) {
      if (absl::Now() > deadline) return false;
      clock_.Advance(timeout);
      expired += watchdog->Poll();
      if (expired < n) absl::SleepFor(absl::Milliseconds(5));  // bounded
    }
    return expired == n;
  }

  ManualClock clock_;  // outlives server_
  prometheus::Registry registry_;
  std::unique_ptr<ServerMetrics> metrics_;
  std::unique_ptr<GrpcServer> server_;
  std::unique_ptr<asgd::v1::ParameterServer::Stub> stub_;
};

// One push stream with its context.
struct PushStreamCall {
  explicit PushStreamCall(asgd::v1::ParameterServer::Stub* stub) {
    ctx.set_deadline(std::chrono::system_clock::now() +
                     std::chrono::seconds(60));
    stream = stub->PushStream(&ctx);
  }
  // Sends one push; false when the stream broke before the reply.
  bool Push(const std::vector<PushChunk>& msgs, PushReply* reply) {
    for (const PushChunk& m : msgs) {
      if (!stream->Write(m)) break;
    }
    return stream->Read(reply);
  }
  grpc::Status Close() {
    stream->WritesDone();
    return stream->Finish();
  }
  grpc::ClientContext ctx;
  std::unique_ptr<grpc::ClientReaderWriter<PushChunk, PushReply>> stream;
};

TEST_F(StreamTest, DescribeModelOffersCompressedPushesAndStreams) {
  for (bool compressed : {true, false}) {
    Start({}, compressed);
    grpc::ClientContext ctx;
    asgd::v1::ModelDescription d;
    ASSERT_TRUE(stub_->DescribeModel(&ctx, {}, &d).ok());
    std::vector<int> push_dtypes(d.push_dtypes().begin(),
                                 d.push_dtypes().end());
    if (compressed) {
      EXPECT_EQ(push_dtypes, (std::vector<int>{0, 1, 2, 3}));
      EXPECT_EQ(d.compressed_format_version(), 1u);
      EXPECT_GT(d.max_compressed_chunk_elements(), 0u);
    } else {
      EXPECT_EQ(push_dtypes, (std::vector<int>{0, 1}));
      EXPECT_EQ(d.compressed_format_version(), 0u);
    }
    EXPECT_EQ(d.wire_dtypes_size(), 2);  // what pulls can ask for
    EXPECT_TRUE(d.streams());
    server_.reset();
  }
}

TEST_F(StreamTest, ManyPushesOnOneStreamEachGetTheirReply) {
  Start();
  const std::vector<float> before = store()->Snapshot();
  PushStreamCall call(stub_.get());
  for (uint64_t i = 0; i < 3; ++i) {
    PushReply reply;
    ASSERT_TRUE(call.Push(FloatPush(0.25f, i), &reply)) << i;
    EXPECT_EQ(reply.result(), PushReply::APPLIED);
    EXPECT_EQ(reply.model_version(), i + 1);
    EXPECT_EQ(reply.staleness(), 0u);
  }
  EXPECT_TRUE(call.Close().ok());
  const std::vector<float> after = store()->Snapshot();
  for (size_t i = 0; i < after.size(); ++i) {
    float w = before[i];
    for (int k = 0; k < 3; ++k) w -= 0.5f * 0.25f;
    ASSERT_EQ(after[i], w) << i;
  }
  EXPECT_EQ(Counter("asgd_server_pushes_by_encoding_total", "encoding",
                    "fp32"),
            3);
  EXPECT_EQ(server_->service()->pushes_in_flight(), 0);
}

// 1-bit and top-k pushes, on a long-lived stream and each on a fresh one,
// move the weights by exactly the learning rate times the gradient they
// decode to, and are counted by encoding with their wire bytes.
TEST_F(StreamTest, CompressedPushesApplyTheirDecodedGradient) {
  Start();
  PushStreamCall call(stub_.get());
  uint64_t version = 0;
  for (PushEncoding encoding : {PushEncoding::kOneBit, PushEncoding::kTopK}) {
    for (bool on_open_stream : {true, false}) {
      const std::vector<float> before = store()->Snapshot();
      std::vector<float> decoded;
      const std::vector<PushChunk> msgs =
          CompressedPush(encoding, version, &decoded);
      int64_t bytes = 0;
      for (const PushChunk& m : msgs) bytes += m.chunk().data().size();
      PushReply reply;
      if (on_open_stream) {
        ASSERT_TRUE(call.Push(msgs, &reply));
      } else {
        PushStreamCall fresh(stub_.get());
        ASSERT_TRUE(fresh.Push(msgs, &reply));
        EXPECT_TRUE(fresh.Close().ok());
      }
      ASSERT_EQ(reply.result(), PushReply::APPLIED);
      ++version;
      const std::vector<float> after = store()->Snapshot();
      for (size_t i = 0; i < after.size(); ++i) {
        ASSERT_EQ(after[i], before[i] - 0.5f * decoded[i])
            << PushEncodingName(encoding) << " element " << i;
      }
      EXPECT_LT(bytes, static_cast<int64_t>(4 * decoded.size()));
    }
    const std::string name(PushEncodingName(encoding));
    EXPECT_EQ(Counter("asgd_server_pushes_by_encoding_total", "encoding", name),
              2);
    EXPECT_GT(Counter("asgd_server_push_wire_bytes_total", "encoding", name),
              0);
  }
  EXPECT_TRUE(call.Close().ok());
}

// Every malformed push, float or compressed, ends its stream with
// INVALID_ARGUMENT naming the problem, is counted by reason, and changes
// nothing; the next stream works.
TEST_F(StreamTest, InvalidPushesEndTheStreamAndChangeNothing) {
  Start();
  const std::vector<float> before = store()->Snapshot();
  struct Named {
    BadPushCase c;
    bool compressed;
  };
  std::vector<Named> cases;
  for (const BadPushCase& c : MalformedPushCases()) cases.push_back({c, false});
  for (const BadPushCase& c : MalformedCompressedPushCases()) {
    cases.push_back({c, true});
  }
  for (const Named& n : cases) {
    std::vector<PushChunk> msgs =
        n.compressed ? CompressedPush(PushEncoding::kOneBit, 0, nullptr)
                     : FloatPush(0.25f, 0);
    n.c.corrupt(msgs);
    const uint64_t count_before = Rejected(n.c.reason);
    PushStreamCall call(stub_.get());
    PushReply reply;
    EXPECT_FALSE(call.Push(msgs, &reply)) << n.c.name;
    const grpc::Status status = call.stream->Finish();
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT)
        << n.c.name << ": " << status.error_message();
    EXPECT_NE(status.error_message().find(n.c.message), std::string::npos)
        << n.c.name << ": " << status.error_message();
    EXPECT_EQ(Rejected(n.c.reason), count_before + 1) << n.c.name;
    EXPECT_EQ(store()->Snapshot(), before) << n.c.name;
  }
  EXPECT_EQ(store()->version(), 0u);
  PushStreamCall call(stub_.get());
  PushReply reply;
  ASSERT_TRUE(call.Push(FloatPush(0.25f, 0), &reply));
  EXPECT_EQ(reply.result(), PushReply::APPLIED);
  EXPECT_TRUE(call.Close().ok());
}

TEST_F(StreamTest, CompressedPushesToAServerThatTakesNoneAreRefused) {
  Start({}, /*compressed=*/false);
  const std::vector<float> before = store()->Snapshot();
  PushStreamCall call(stub_.get());
  PushReply reply;
  EXPECT_FALSE(
      call.Push(CompressedPush(PushEncoding::kOneBit, 0, nullptr), &reply));
  const grpc::Status status = call.stream->Finish();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(status.error_message().find("does not accept compressed pushes"),
            std::string::npos)
      << status.error_message();
  EXPECT_EQ(Rejected(RejectReason::kBadEncoding), 1u);
  EXPECT_EQ(store()->Snapshot(), before);
}

// The progress deadline runs from a push's first message to its commit: a
// push that stalls is ended (DEADLINE_EXCEEDED, nothing applied), while a
// stream that waits between two pushes for longer than that is not. The
// watchdogs run on a manual clock.
TEST_F(StreamTest, AStalledPushIsEndedButAStreamBetweenPushesIsNot) {
  GrpcServiceOptions service;
  service.clock = clock_.AsFunction();
  Start(service);
  StreamWatchdog* progress = server_->service()->watchdog();
  PushStreamCall waiting(stub_.get());
  PushReply reply;
  ASSERT_TRUE(waiting.Push(FloatPush(0.25f, 0), &reply));
  // Its reply is watched until the server saw it written (a client may read
  // it before that): only then is the stream between pushes.
  ASSERT_TRUE(AwaitWatched(progress, 0));
  // Another stream starts a push and stalls half way.
  PushStreamCall stalled(stub_.get());
  std::vector<PushChunk> msgs = FloatPush(0.25f, 1);
  ASSERT_TRUE(stalled.stream->Write(msgs[0]));
  ASSERT_TRUE(stalled.stream->Write(msgs[1]));
  ASSERT_TRUE(AwaitWatched(progress, 1));
  // Not before its timeout...
  clock_.Advance(service.push_progress_timeout - absl::Milliseconds(1));
  EXPECT_EQ(progress->Poll(), 0);
  // ...but once it passed (a message still in flight when the clock moved
  // counts as progress then: move it on until the watchdog expires it).
  ASSERT_TRUE(ExpireAfter(progress, service.push_progress_timeout, 1));
  EXPECT_FALSE(stalled.stream->Read(&reply));
  const grpc::Status status = stalled.stream->Finish();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED)
      << status.error_message();
  EXPECT_EQ(Rejected(RejectReason::kStalled), 1u);
  EXPECT_EQ(store()->version(), 1u);
  // The first stream sat between pushes all that time: it still works.
  ASSERT_TRUE(waiting.Push(FloatPush(0.25f, 1), &reply));
  EXPECT_EQ(reply.model_version(), 2u);
  EXPECT_TRUE(waiting.Close().ok());
}

// A stream with nothing under way for the idle timeout is closed with OK,
// and its slot among the address's pushes comes back.
TEST_F(StreamTest, IdleStreamsAreClosedAndTheirSlotFreed) {
  GrpcServiceOptions service;
  service.clock = clock_.AsFunction();
  service.max_pushes_per_peer = 1;
  Start(service);
  StreamWatchdog* idle = server_->service()->idle_watchdog();
  PushStreamCall call(stub_.get());
  PushReply reply;
  ASSERT_TRUE(call.Push(FloatPush(0.25f, 0), &reply));
  ASSERT_TRUE(AwaitWatched(idle, 1));  // idle again after the reply
  clock_.Advance(service.stream_idle_timeout - absl::Milliseconds(1));
  EXPECT_EQ(idle->Poll(), 0);
  clock_.Advance(absl::Milliseconds(1));
  EXPECT_EQ(idle->Poll(), 1);
  EXPECT_FALSE(call.stream->Read(&reply));  // the server closed it
  EXPECT_TRUE(call.stream->Finish().ok());
  ASSERT_TRUE(AwaitPushesInFlight(0));
  PushStreamCall next(stub_.get());
  ASSERT_TRUE(next.Push(FloatPush(0.25f, 1), &reply));
  EXPECT_EQ(reply.result(), PushReply::APPLIED);
}

// An open push stream is one of its address's push slots; pull streams are
// counted apart.
TEST_F(StreamTest, AnOpenPushStreamHoldsOneOfItsAddressSlots) {
  GrpcServiceOptions service;
  service.max_pushes_per_peer = 1;
  Start(service);
  PushStreamCall holder(stub_.get());
  ASSERT_TRUE(AwaitPushesInFlight(1));
  PushStreamCall refused(stub_.get());
  PushReply reply;
  EXPECT_FALSE(refused.Push(FloatPush(0.25f, 0), &reply));
  EXPECT_EQ(refused.stream->Finish().error_code(),
            grpc::StatusCode::UNAVAILABLE);
  const auto& trailers = refused.ctx.GetServerTrailingMetadata();
  auto it = trailers.find("asgd-refusal");
  ASSERT_NE(it, trailers.end());
  EXPECT_EQ(std::string(it->second.data(), it->second.size()), "PEER_LIMIT");
  EXPECT_EQ(Rejected(RejectReason::kPeerLimit), 1u);
  // A pull stream from the same address is still admitted.
  grpc::ClientContext ctx;
  auto pulls = stub_->PullStream(&ctx);
  PullRequest request;
  ASSERT_TRUE(pulls->Write(request));
  PullChunk chunk;
  ASSERT_TRUE(pulls->Read(&chunk));
  ctx.TryCancel();
  pulls->Finish();
  // The holder pushes as usual.
  ASSERT_TRUE(holder.Push(FloatPush(0.25f, 0), &reply));
  EXPECT_TRUE(holder.Close().ok());
}

// Reads one pull from a PullStream into `values` (the server's range);
// returns its version, or -1 when the stream ended.
int64_t ReadPull(grpc::ClientReaderWriter<PullRequest, PullChunk>* stream,
                 const ParamStore& store, std::vector<float>* values) {
  values->assign(store.range().size(), 0.0f);
  ChunkAssembler assembler(&store.layout(), store.range(), kChunk,
                           values->data(), true);
  PullChunk msg;
  while (stream->Read(&msg)) {
    if (msg.end_of_pull()) {
      EXPECT_EQ(msg.num_chunks(),
                static_cast<uint64_t>(assembler.chunks_received()));
      EXPECT_TRUE(assembler.Finish(msg.num_chunks()).ok());
      return static_cast<int64_t>(msg.model_version());
    }
    const PullMessage view = ViewOf(msg);
    EXPECT_TRUE(assembler.Add(view.chunk).ok());
  }
  return -1;
}

TEST_F(StreamTest, PullStreamServesManyPullsAndEndsEachOne) {
  Start();
  grpc::ClientContext ctx;
  auto stream = stub_->PullStream(&ctx);
  std::vector<float> values;
  PullRequest request;
  ASSERT_TRUE(stream->Write(request));
  EXPECT_EQ(ReadPull(stream.get(), *store(), &values), 0);
  EXPECT_EQ(values, store()->Snapshot());
  // A push in between, then a bfloat16 pull of the new weights.
  PushStreamCall push(stub_.get());
  PushReply reply;
  ASSERT_TRUE(push.Push(FloatPush(0.25f, 0), &reply));
  request.set_dtype(asgd::v1::BFLOAT16);
  ASSERT_TRUE(stream->Write(request));
  EXPECT_EQ(ReadPull(stream.get(), *store(), &values), 1);
  const std::vector<float> weights = store()->Snapshot();
  for (size_t i = 0; i < weights.size(); ++i) {
    ASSERT_EQ(values[i], Bf16ToFloat(FloatToBf16(weights[i]))) << i;
  }
  // A compressed encoding cannot be pulled: the stream ends.
  request.set_dtype(asgd::v1::ONE_BIT);
  ASSERT_TRUE(stream->Write(request));
  EXPECT_EQ(ReadPull(stream.get(), *store(), &values), -1);
  const grpc::Status status = stream->Finish();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(status.error_message().find("pushes only"), std::string::npos)
      << status.error_message();
  EXPECT_TRUE(push.Close().ok());
  EXPECT_EQ(server_->service()->pull_streams_open(), 0);
}

// A server with ADMM slots: says so, refuses a gradient push
// (FAILED_PRECONDITION) and a slot it does not keep (INVALID_ARGUMENT) in
// pushes and pulls, changing nothing; an ADMM point moves the weights by
// 1 / slots of its difference to the slot, and the slot pulls back.
TEST_F(StreamTest, AdmmSlotsOverTheWire) {
  Start({}, true, /*admm_slots=*/2);
  grpc::ClientContext describe_ctx;
  asgd::v1::ModelDescription description;
  ASSERT_TRUE(stub_->DescribeModel(&describe_ctx, {}, &description).ok());
  EXPECT_EQ(description.admm_slots(), 2u);
  const std::vector<float> w0 = store()->Snapshot();
  const auto push_status = [&](const std::vector<PushChunk>& msgs) {
    PushStreamCall call(stub_.get());
    PushReply reply;
    EXPECT_FALSE(call.Push(msgs, &reply));
    return call.Close();
  };
  EXPECT_EQ(push_status(FloatPush(0.25f, 0)).error_code(),
            grpc::StatusCode::FAILED_PRECONDITION);
  std::vector<PushChunk> point = FloatPush(0.25f, 0);
  point[0].mutable_header()->set_kind(asgd::v1::PushHeader::ADMM);
  point[0].mutable_header()->set_admm_slot(2);
  EXPECT_EQ(push_status(point).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(Rejected(RejectReason::kBadHeader), 2u);
  EXPECT_EQ(store()->Snapshot(), w0);

  point[0].mutable_header()->set_admm_slot(1);
  PushStreamCall call(stub_.get());
  PushReply reply;
  ASSERT_TRUE(call.Push(point, &reply));
  EXPECT_EQ(reply.result(), PushReply::APPLIED);
  EXPECT_TRUE(call.Close().ok());
  const std::vector<float> w = store()->Snapshot();
  for (size_t i = 0; i < w.size(); ++i) {
    ASSERT_EQ(w[i], w0[i] + (0.25f - w0[i]) / 2) << i;
  }

  grpc::ClientContext ctx;
  auto stream = stub_->PullStream(&ctx);
  std::vector<float> values;
  PullRequest request;
  request.set_admm_slot(1);
  ASSERT_TRUE(stream->Write(request));
  EXPECT_EQ(ReadPull(stream.get(), *store(), &values), 1);
  EXPECT_EQ(values, std::vector<float>(w.size(), 0.25f));
  request.set_admm_slot(0);
  ASSERT_TRUE(stream->Write(request));
  EXPECT_EQ(ReadPull(stream.get(), *store(), &values), 1);
  EXPECT_EQ(values, w0);
  request.set_admm_slot(2);
  ASSERT_TRUE(stream->Write(request));
  EXPECT_EQ(ReadPull(stream.get(), *store(), &values), -1);
  EXPECT_EQ(stream->Finish().error_code(), grpc::StatusCode::INVALID_ARGUMENT);
}

// Shutting down ends idle streams at once with UNAVAILABLE: a shutdown with
// a minute of grace does not wait for them.
TEST_F(StreamTest, ShutdownEndsIdleStreamsAtOnce) {
  Start();
  PushStreamCall push(stub_.get());
  PushReply reply;
  ASSERT_TRUE(push.Push(FloatPush(0.25f, 0), &reply));
  grpc::ClientContext ctx;
  auto pulls = stub_->PullStream(&ctx);
  PullRequest request;
  ASSERT_TRUE(pulls->Write(request));
  std::vector<float> values;
  ASSERT_EQ(ReadPull(pulls.get(), *store(), &values), 1);
  const absl::Time start = absl::Now();
  server_->Shutdown(absl::Seconds(60));
  EXPECT_LT(absl::Now() - start, absl::Seconds(30));
  EXPECT_FALSE(push.stream->Read(&reply));
  EXPECT_EQ(push.stream->Finish().error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(ReadPull(pulls.get(), *store(), &values), -1);
  EXPECT_EQ(pulls->Finish().error_code(), grpc::StatusCode::UNAVAILABLE);
}

}  // namespace
}  // namespace asgd
