// Every push validation case, sent over a real gRPC connection to a server on
// port 0: each gets INVALID_ARGUMENT, is counted, and leaves the weights
// unchanged. Plus a valid push, a pull round trip and a broken stream.
#include <atomic>
#include <cmath>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "common/chunking.h"
#include "common/wire_codec.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "model/model_spec.h"
#include "proto/asgd.grpc.pb.h"
#include "server/grpc_server.h"
#include "server/manual_clock.h"
#include "server/model_options.h"
#include "server/push_test_cases.h"

namespace asgd {
namespace {

using asgd::v1::PushChunk;
using asgd::v1::PushReply;

// Lets a test wait for the server to reject a push for a given reason.
class RejectionWatcher : public StoreObserver {
 public:
  void OnPushAccepted(uint64_t, uint64_t) override {}
  void OnPushApplied(uint64_t, uint64_t) override {}
  void OnShardApplied(int, double) override {}
  void OnPushRejected(RejectReason reason) override {
    if (reason == RejectReason::kIncomplete && !incomplete.HasBeenNotified()) {
      incomplete.Notify();
    }
  }
  absl::Notification incomplete;
};

class GrpcServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ParamStoreOptions o;
    SetModel(PushTestSpec(), &o);
    o.num_servers = 2;
    o.server_index = 0;
    o.num_shards = 2;
    o.optimizer.learning_rate = 0.5f;
    o.max_chunk_elements = 64;  // many chunks per push
    o.observer = &watcher_;
    auto server = GrpcServer::Start(o, InitialParams(PushTestSpec(), 1),
                                    "127.0.0.1", 0);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    auto channel = grpc::CreateChannel(server_->local_address(),
                                       grpc::InsecureChannelCredentials());
    stub_ = asgd::v1::ParameterServer::NewStub(channel);
    plan_ = PlanChunks(store()->layout(), store()->range(), 64);
    ASSERT_GE(plan_.size(), 4u);
  }

  ParamStore* store() { return server_->store(); }

  // A valid push of `value` everywhere, computed from `version`.
  std::vector<PushChunk> ValidPush(float value, uint64_t version) {
    std::vector<PushChunk> msgs;
    PushChunk header;
    header.set_model_version(version);
    header.mutable_header()->set_worker_id(7);
    header.mutable_header()->set_model_version(version);
    header.mutable_header()->set_num_minibatches(1);
    msgs.push_back(header);
    for (const ChunkRef& c : plan_) {
      PushChunk m;
      m.set_model_version(version);
      m.mutable_chunk()->set_tensor(store()->layout().tensors()[c.tensor].name);
      m.mutable_chunk()->set_offset(c.offset);
      std::vector<float> values(c.count, value);
      AppendFloats(values.data(), c.count, m.mutable_chunk()->mutable_data());
      msgs.push_back(m);
    }
    PushChunk commit;
    commit.set_model_version(version);
    commit.mutable_commit()->set_num_chunks(plan_.size());
    msgs.push_back(commit);
    return msgs;
  }

  // One push on its own PushStream: its reply, then the stream's status
  // (an invalid push ends the stream with the push's error).
  grpc::Status Send(const std::vector<PushChunk>& msgs, PushReply* reply) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() +
                     std::chrono::seconds(10));
    auto stream = stub_->PushStream(&ctx);
    for (const PushChunk& m : msgs) {
      if (!stream->Write(m)) break;  // server already ended the stream
    }
    stream->WritesDone();
    stream->Read(reply);
    return stream->Finish();
  }

  // One pull on its own PullStream: `on_chunk` gets every chunk message of
  // the reply (not the end-of-pull message), then the stream's status.
  grpc::Status PullOnce(
      const asgd::v1::PullRequest& request,
      const std::function<void(const asgd::v1::PullChunk&)>& on_chunk) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() +
                     std::chrono::seconds(10));
    auto stream = stub_->PullStream(&ctx);
    stream->Write(request);
    stream->WritesDone();
    asgd::v1::PullChunk chunk;
    while (stream->Read(&chunk)) {
      if (!chunk.end_of_pull()) on_chunk(chunk);
    }
    return stream->Finish();
  }

  // One raw call of `method` with `bytes` as its only message (a generic
  // stub: no protobuf on the client side); its status. A call that does not
  // start is UNKNOWN.
  grpc::Status RawCall(const char* method, const std::string& bytes) {
    grpc::GenericStub generic(grpc::CreateChannel(
        server_->local_address(), grpc::InsecureChannelCredentials()));
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() +
                     std::chrono::seconds(10));
    grpc::CompletionQueue cq;
    auto call = generic.PrepareCall(&ctx, method, &cq);
    void* tag;
    bool ok;
    call->StartCall(reinterpret_cast<void*>(1));
    grpc::Status status(grpc::StatusCode::UNKNOWN, "the call did not start");
    if (cq.Next(&tag, &ok) && ok) {
      grpc::Slice slice(bytes);
      call->WriteLast(grpc::ByteBuffer(&slice, 1), grpc::WriteOptions(),
                      reinterpret_cast<void*>(2));
      cq.Next(&tag, &ok);
      call->Finish(&status, reinterpret_cast<void*>(3));
      cq.Next(&tag, &ok);
    }
    cq.Shutdown();
    while (cq.Next(&tag, &ok)) {
    }
    return status;
  }

  uint64_t Rejected(RejectReason r) {
    return store()->stats().rejected[static_cast<int>(r)];
  }

  RejectionWatcher watcher_;
  std::unique_ptr<GrpcServer> server_;
  std::unique_ptr<asgd::v1::ParameterServer::Stub> stub_;
  std::vector<ChunkRef> plan_;
};

TEST_F(GrpcServiceTest, DescribeModelReportsLayout) {
  grpc::ClientContext ctx;
  asgd::v1::ModelDescription d;
  ASSERT_TRUE(stub_->DescribeModel(&ctx, {}, &d).ok());
  EXPECT_EQ(d.tensors_size(), 4);
  EXPECT_EQ(d.tensors(0).name(), "layer0/weight");
  EXPECT_EQ(d.tensors(0).shape(0), 16u);
  EXPECT_EQ(d.tensors(0).shape(1), 20u);
  EXPECT_EQ(d.num_servers(), 2u);
  EXPECT_EQ(d.num_shards(), 2u);
  EXPECT_EQ(d.layout_fingerprint(), store()->layout().Fingerprint());
  // Slices of every tensor cover it exactly once across the pool.
  for (const auto& t : d.tensors()) {
    uint64_t covered = 0;
    for (const auto& s : t.slices()) covered += s.end() - s.begin();
    uint64_t size = 1;
    for (uint64_t dim : t.shape()) size *= dim;
    EXPECT_EQ(covered, size) << t.name();
  }
}

TEST_F(GrpcServiceTest, PullReturnsTheWeightsAndVersion) {
  std::vector<float> got(store()->range().size());
  ChunkAssembler assembler(&store()->layout(), store()->range(), 64, got.data(),
                           true);
  ASSERT_TRUE(PullOnce({}, [&](const asgd::v1::PullChunk& chunk) {
                EXPECT_EQ(chunk.model_version(), 0u);
                EXPECT_TRUE(assembler
                                .Add(chunk.chunk().tensor(),
                                     chunk.chunk().offset(),
                                     chunk.chunk().data())
                                .ok());
              }).ok());
  ASSERT_TRUE(assembler.Finish(assembler.chunks_received()).ok());
  EXPECT_EQ(got, store()->Snapshot());
}

TEST_F(GrpcServiceTest, ValidPushIsAppliedAndAdvancesTheVersion) {
  const std::vector<float> before = store()->Snapshot();
  PushReply reply;
  ASSERT_TRUE(Send(ValidPush(0.25f, 0), &reply).ok());
  EXPECT_EQ(reply.result(), PushReply::APPLIED);
  EXPECT_EQ(reply.staleness(), 0u);
  EXPECT_EQ(reply.model_version(), 1u);
  EXPECT_EQ(store()->version(), 1u);
  const std::vector<float> after = store()->Snapshot();
  for (size_t i = 0; i < after.size(); ++i) {
    ASSERT_FLOAT_EQ(after[i], before[i] - 0.5f * 0.25f);
  }
  // A second push from version 0 is one version stale.
  ASSERT_TRUE(Send(ValidPush(0.25f, 0), &reply).ok());
  EXPECT_EQ(reply.staleness(), 1u);
  EXPECT_EQ(reply.model_version(), 2u);
}

TEST_F(GrpcServiceTest, EveryInvalidPushIsRejectedAndChangesNothing) {
  std::vector<BadPushCase> cases = MalformedPushCases();
  // What only the store and the stream can refuse.
  cases.push_back({"no commit", [](auto& m) { m.pop_back(); },
                   RejectReason::kIncomplete, "before its commit"});
  const std::vector<float> before = store()->Snapshot();
  for (const BadPushCase& c : cases) {
    std::vector<PushChunk> msgs = ValidPush(0.25f, 0);
    c.corrupt(msgs);
    const uint64_t count_before = Rejected(c.reason);
    PushReply reply;
    grpc::Status status = Send(msgs, &reply);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT)
        << c.name << ": " << status.error_message();
    EXPECT_NE(status.error_message().find(c.message), std::string::npos)
        << c.name << ": " << status.error_message();
    EXPECT_EQ(Rejected(c.reason), count_before + 1) << c.name;
    EXPECT_EQ(store()->Snapshot(), before) << c.name;
    EXPECT_EQ(store()->version(), 0u) << c.name;
  }
}

// A restored server gets pushes from versions it never reached: ABORTED
// (pull again), not INVALID_ARGUMENT, so clients need no message text.
TEST_F(GrpcServiceTest, VersionFromTheFutureIsAbortedAndChangesNothing) {
  const std::vector<float> before = store()->Snapshot();
  PushReply reply;
  const grpc::Status status = Send(ValidPush(0.25f, 99), &reply);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::ABORTED)
      << status.error_message();
  EXPECT_EQ(Rejected(RejectReason::kFutureVersion), 1u);
  EXPECT_EQ(store()->Snapshot(), before);
  EXPECT_EQ(store()->version(), 0u);
}

// The 100 KB name gets a short message at once, and the channel that sent
// it still works (a 100 KB message would not fit in gRPC's headers).
TEST_F(GrpcServiceTest, HugeTensorNameIsRefusedQuicklyAndTheChannelGoesOn) {
  std::vector<PushChunk> msgs = ValidPush(0.25f, 0);
  msgs[1].mutable_chunk()->set_tensor(std::string(100 * 1024, 'x'));
  PushReply reply;
  const absl::Time start = absl::Now();
  const grpc::Status status = Send(msgs, &reply);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT)
      << status.error_message();
  EXPECT_LT(status.error_message().size(), 256u);
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
  ASSERT_TRUE(Send(ValidPush(0.25f, 0), &reply).ok());
  EXPECT_EQ(reply.result(), PushReply::APPLIED);
}

TEST_F(GrpcServiceTest, StreamBrokenHalfWayIsNotApplied) {
  const std::vector<float> before = store()->Snapshot();
  std::vector<PushChunk> msgs = ValidPush(0.25f, 0);
  {
    grpc::ClientContext ctx;
    auto writer = stub_->PushStream(&ctx);
    for (size_t i = 0; i < msgs.size() / 2; ++i)
      ASSERT_TRUE(writer->Write(msgs[i]));
    // Wait (bounded) until the server has the stream: a call cancelled
    // before its headers left the client never reaches the server at all.
    const absl::Time deadline = absl::Now() + absl::Seconds(30);
    while (server_->service()->pushes_in_flight() < 1 &&
           absl::Now() < deadline) {
      absl::SleepFor(absl::Milliseconds(5));  // polling a condition, bounded
    }
    ASSERT_EQ(server_->service()->pushes_in_flight(), 1);
    ctx.TryCancel();  // the client goes away mid-push
    writer->Finish();
  }
  // The server notices the broken stream and rejects it; wait for that.
  ASSERT_TRUE(
      watcher_.incomplete.WaitForNotificationWithTimeout(absl::Seconds(10)));
  EXPECT_EQ(Rejected(RejectReason::kIncomplete), 1u);
  EXPECT_EQ(store()->Snapshot(), before);
  EXPECT_EQ(store()->version(), 0u);
  // The server is still healthy: a valid push goes through.
  PushReply reply;
  ASSERT_TRUE(Send(ValidPush(0.25f, 0), &reply).ok());
  EXPECT_EQ(reply.result(), PushReply::APPLIED);
}

TEST_F(GrpcServiceTest, DescribeModelListsBothWireEncodings) {
  grpc::ClientContext ctx;
  asgd::v1::ModelDescription d;
  ASSERT_TRUE(stub_->DescribeModel(&ctx, {}, &d).ok());
  ASSERT_EQ(d.wire_dtypes_size(), 2);
  EXPECT_EQ(d.wire_dtypes(0), asgd::v1::FLOAT32);
  EXPECT_EQ(d.wire_dtypes(1), asgd::v1::BFLOAT16);
  EXPECT_EQ(d.max_push_minibatches(), 64u);
}

// A push whose values are finite but whose step would overflow the weights
// (3e38 times the learning rate times 64 minibatches) is refused whole, and
// the weights stay as they were.
TEST_F(GrpcServiceTest, UpdateThatWouldMakeTheModelNonFiniteIsRefused) {
  const std::vector<float> before = store()->Snapshot();
  for (int i = 0; i < 3; ++i) {
    std::vector<PushChunk> msgs = ValidPush(3e38f, 0);
    msgs[0].mutable_header()->set_num_minibatches(64);
    PushReply reply;
    const grpc::Status status = Send(msgs, &reply);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT)
        << status.error_message();
    EXPECT_NE(status.error_message().find("non-finite"), std::string::npos)
        << status.error_message();
  }
  EXPECT_EQ(Rejected(RejectReason::kNonFiniteUpdate), 3u);
  EXPECT_EQ(store()->Snapshot(), before);
  // The refused updates used up their versions; a sane push still works.
  PushReply reply;
  ASSERT_TRUE(Send(ValidPush(0.25f, store()->version()), &reply).ok());
  EXPECT_EQ(reply.result(), PushReply::APPLIED);
}

// A bfloat16 pull is the weights rounded to bfloat16, in half the bytes.
TEST_F(GrpcServiceTest, Bf16PullIsTheRoundedWeights) {
  asgd::v1::PullRequest request;
  request.set_dtype(asgd::v1::BFLOAT16);
  std::vector<float> got(store()->range().size());
  ChunkAssembler assembler(&store()->layout(), store()->range(), 64, got.data(),
                           true);
  int64_t bytes = 0;
  ASSERT_TRUE(PullOnce(request, [&](const asgd::v1::PullChunk& chunk) {
                EXPECT_EQ(chunk.chunk().dtype(), asgd::v1::BFLOAT16);
                bytes += chunk.chunk().data().size();
                EXPECT_TRUE(assembler
                                .Add(chunk.chunk().tensor(),
                                     chunk.chunk().offset(),
                                     chunk.chunk().data(),
                                     chunk.chunk().dtype())
                                .ok());
              }).ok());
  ASSERT_TRUE(assembler.Finish(assembler.chunks_received()).ok());
  EXPECT_EQ(bytes, 2 * store()->range().size());
  const std::vector<float> weights = store()->Snapshot();
  for (size_t i = 0; i < weights.size(); ++i) {
    ASSERT_EQ(got[i], Bf16ToFloat(FloatToBf16(weights[i]))) << i;
  }
}

// A bfloat16 gradient is widened exactly and applied to float32 weights.
TEST_F(GrpcServiceTest, Bf16PushIsAppliedToFloat32Weights) {
  const std::vector<float> before = store()->Snapshot();
  const float value = 0.3f;  // not exact in bfloat16
  const float wire = Bf16ToFloat(FloatToBf16(value));
  ASSERT_NE(wire, value);
  std::vector<PushChunk> msgs = ValidPush(value, 0);
  for (PushChunk& m : msgs) {
    if (!m.has_chunk()) continue;
    const int64_t n = m.chunk().data().size() / 4;
    std::vector<float> values(n, value);
    std::string data(2 * n, '\0');
    EncodeFloats(values.data(), n, WireDtype::kBfloat16, data.data());
    m.mutable_chunk()->set_data(data);
    m.mutable_chunk()->set_dtype(asgd::v1::BFLOAT16);
  }
  PushReply reply;
  ASSERT_TRUE(Send(msgs, &reply).ok());
  EXPECT_EQ(reply.result(), PushReply::APPLIED);
  const std::vector<float> after = store()->Snapshot();
  for (size_t i = 0; i < after.size(); ++i) {
    ASSERT_FLOAT_EQ(after[i], before[i] - 0.5f * wire);
  }
}

TEST_F(GrpcServiceTest, PullOfAnUnknownEncodingIsInvalid) {
  asgd::v1::PullRequest request;
  request.set_dtype(static_cast<asgd::v1::WireDtype>(9));
  int chunks = 0;
  const grpc::Status status =
      PullOnce(request, [&](const asgd::v1::PullChunk&) { ++chunks; });
  EXPECT_EQ(chunks, 0);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(status.error_message().find("dtype 9"), std::string::npos)
      << status.error_message();
}

// The per-call Push and Pull of protocol version 1 are retired: an old
// client that calls them gets UNIMPLEMENTED and changes nothing, and the
// server goes on serving the streams; DescribeModel says which protocol it
// speaks.
TEST_F(GrpcServiceTest, RetiredPerCallPushAndPullAreUnimplemented) {
  const std::vector<float> before = store()->Snapshot();
  std::string push_bytes;
  ASSERT_TRUE(ValidPush(0.25f, 0)[0].SerializeToString(&push_bytes));
  for (const char* method :
       {"/asgd.v1.ParameterServer/Push", "/asgd.v1.ParameterServer/Pull"}) {
    const grpc::Status status = RawCall(method, push_bytes);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::UNIMPLEMENTED)
        << method << ": " << status.error_message();
  }
  EXPECT_EQ(store()->Snapshot(), before);
  grpc::ClientContext ctx;
  asgd::v1::ModelDescription d;
  ASSERT_TRUE(stub_->DescribeModel(&ctx, {}, &d).ok());
  EXPECT_EQ(d.protocol_version(), 2u);
  EXPECT_TRUE(d.streams());
  PushReply reply;
  ASSERT_TRUE(Send(ValidPush(0.25f, 0), &reply).ok());
  EXPECT_EQ(reply.result(), PushReply::APPLIED);
  int chunks = 0;
  EXPECT_TRUE(
      PullOnce({}, [&](const asgd::v1::PullChunk&) { ++chunks; }).ok());
  EXPECT_GT(chunks, 0);
}

// Bytes that are not protobuf at all, sent with a generic stub: a clear
// INVALID_ARGUMENT, counted, nothing applied, the server still serves.
TEST_F(GrpcServiceTest, BytesThatAreNotProtobufAreRejected) {
  const std::vector<float> before = store()->Snapshot();
  const std::string garbage("\x0b\xff\xff\xff", 4);  // a group, truncated
  for (const char* method :
       {"/asgd.v1.ParameterServer/PushStream",
        "/asgd.v1.ParameterServer/PullStream",
        "/asgd.v1.ParameterServer/DescribeModel",
        "/asgd.v1.ParameterServer/FetchBatches"}) {
    const grpc::Status status = RawCall(method, garbage);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT)
        << method << ": " << status.error_message();
    EXPECT_NE(status.error_message().find("malformed"), std::string::npos)
        << status.error_message();
  }
  EXPECT_EQ(Rejected(RejectReason::kBadHeader), 1u);
  EXPECT_EQ(store()->Snapshot(), before);
  PushReply reply;
  ASSERT_TRUE(Send(ValidPush(0.25f, 0), &reply).ok());
  EXPECT_EQ(reply.result(), PushReply::APPLIED);
}

// Admission limits with test-sized settings: 2 pushes in flight per client
// address, and the progress watchdog on a manual clock.
class PushAdmissionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ParamStoreOptions o;
    SetModel(PushTestSpec(), &o);
    o.num_shards = 2;
    GrpcServiceOptions service;
    service.clock = clock_.AsFunction();
    service.max_pushes_per_peer = 2;
    auto server =
        GrpcServer::Start(o, InitialParams(PushTestSpec(), 1), "127.0.0.1",
                          0, nullptr, {}, nullptr, service);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
  }

  uint64_t Rejected(RejectReason r) {
    return server_->store()->stats().rejected[static_cast<int>(r)];
  }

  ManualClock clock_;  // outlives server_
  std::unique_ptr<GrpcServer> server_;
};

TEST_F(PushAdmissionTest, StalledStreamsAreEndedAndExtraOnesRefusedAtOnce) {
  auto stub = asgd::v1::ParameterServer::NewStub(grpc::CreateChannel(
      server_->local_address(), grpc::InsecureChannelCredentials()));
  const std::vector<float> before = server_->store()->Snapshot();
  // Each stream sends a header, then nothing, and waits for its status on a
  // thread of its own.
  struct Stream {
    grpc::ClientContext ctx;
    std::unique_ptr<grpc::ClientReaderWriter<PushChunk, PushReply>> writer;
    grpc::Status end;
    std::thread waiter;
    ~Stream() {  // a failed assertion leaves the waiter running
      if (!waiter.joinable()) return;
      ctx.TryCancel();
      waiter.join();
    }
  };
  std::atomic<int> ended{0};
  std::vector<std::unique_ptr<Stream>> streams;
  for (int i = 0; i < 3; ++i) {
    auto s = std::make_unique<Stream>();
    s->ctx.set_deadline(std::chrono::system_clock::now() +
                        std::chrono::seconds(30));
    s->writer = stub->PushStream(&s->ctx);
    PushChunk header;
    header.mutable_header()->set_num_minibatches(1);
    s->writer->Write(header);
    s->waiter = std::thread([s = s.get(), &ended] {
      s->end = s->writer->Finish();
      ended.fetch_add(1);
    });
    streams.push_back(std::move(s));
  }
  // The manual clock moves only once every stream the server ended has its
  // status: a server cancels a call it still holds a timeout after ending it
  // (a client that reads nothing), and a jump of the clock must not make
  // that cancel overtake a status still on its way.
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  auto await_ended = [&] {
    const int n = static_cast<int>(Rejected(RejectReason::kPeerLimit) +
                                   Rejected(RejectReason::kStalled));
    while (ended.load() < n && absl::Now() < deadline) {
      absl::SleepFor(absl::Milliseconds(5));  // polling a condition, bounded
    }
  };
  // Two streams admitted, one refused; nothing expires before the timeout,
  // both admitted ones once it passed (a header still on its way when the
  // clock moves counts as progress then: move on until both are ended).
  StreamWatchdog* watchdog = server_->service()->watchdog();
  const absl::Duration timeout = watchdog->timeout();
  while ((server_->service()->pushes_in_flight() < 2 ||
          Rejected(RejectReason::kPeerLimit) < 1) &&
         absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(5));  // polling a condition, bounded
  }
  ASSERT_EQ(server_->service()->pushes_in_flight(), 2);
  await_ended();
  clock_.Advance(timeout - absl::Milliseconds(1));
  watchdog->Poll();
  EXPECT_EQ(Rejected(RejectReason::kStalled), 0u);
  while (Rejected(RejectReason::kStalled) < 2 && absl::Now() < deadline) {
    await_ended();
    clock_.Advance(timeout);
    watchdog->Poll();
    absl::SleepFor(absl::Milliseconds(5));  // polling a condition, bounded
  }
  for (auto& s : streams) s->waiter.join();
  int stalled = 0, refused = 0;
  for (const auto& s : streams) {
    const auto& trailers = s->ctx.GetServerTrailingMetadata();
    if (s->end.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED) {
      ++stalled;
      EXPECT_EQ(trailers.count("asgd-refusal"), 0u);
    } else {
      EXPECT_EQ(s->end.error_code(), grpc::StatusCode::UNAVAILABLE)
          << s->end.error_message();
      auto it = trailers.find("asgd-refusal");
      ASSERT_NE(it, trailers.end());
      EXPECT_EQ(std::string(it->second.data(), it->second.size()),
                "PEER_LIMIT");
      ++refused;
    }
  }
  EXPECT_EQ(stalled, 2);
  EXPECT_EQ(refused, 1);
  EXPECT_EQ(Rejected(RejectReason::kStalled), 2u);
  EXPECT_EQ(Rejected(RejectReason::kPeerLimit), 1u);
  EXPECT_EQ(server_->service()->pushes_in_flight(), 0);
  EXPECT_EQ(server_->store()->Snapshot(), before);
}

}  // namespace
}  // namespace asgd
