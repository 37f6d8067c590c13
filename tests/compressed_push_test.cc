// The worker's gRPC client against real servers on port 0: compressed
// pushes negotiated from DescribeModel, applied through the real push path
// (1-bit and top-k, on the long-lived streams), the
// error-feedback residual handed back when a push is refused, dropped, or
// misses its deadline, and the streams reused, reopened after the server
// closed them as idle, and bounded by deadlines.
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/refusal.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "proto/asgd.grpc.pb.h"
#include "server/grpc_server.h"
#include "server/model_options.h"
#include "tests/test_pool.h"
#include "worker/data/toy_task.h"
#include "worker/ps/grpc_param_client.h"
#include "worker/ps/push_encoder.h"

namespace asgd {
namespace {

constexpr float kLearningRate = 0.5f;

struct PoolSettings {
  int num_servers = 2;
  bool compressed = true;
  uint64_t max_staleness = 0;
  int sync_workers = 0;
  GrpcServiceOptions service;
};

class CompressedPushTest : public ::testing::Test {
 protected:
  void Start(const PoolSettings& settings = {}) {
    spec_ = ToyModel("dnn");
    for (int s = 0; s < settings.num_servers; ++s) {
      ParamStoreOptions o;
      SetModel(spec_, &o);
      o.server_index = s;
      o.num_servers = settings.num_servers;
      o.num_shards = 2;
      o.optimizer.learning_rate = kLearningRate;
      o.compressed_pushes = settings.compressed;
      o.max_staleness = settings.max_staleness;
      o.sync_workers = settings.sync_workers;
      auto server = GrpcServer::Start(o, InitialParams(spec_, 1), "127.0.0.1",
                                      0, nullptr, {}, nullptr,
                                      settings.service);
      ASSERT_TRUE(server.ok()) << server.status();
      addresses_.push_back((*server)->local_address());
      servers_.push_back(*std::move(server));
    }
  }

  absl::StatusOr<std::unique_ptr<GrpcParamClient>> Connect(
      PushEncoding encoding,
      absl::Duration rpc_timeout = absl::Seconds(30)) {
    PoolClientOptions o;
    o.push_encoding = encoding;
    o.top_k_fraction = 0.05;
    o.rpc_timeout = rpc_timeout;
    o.connect_timeout = absl::Seconds(30);
    return GrpcParamClient::Create(addresses_, o);
  }

  std::vector<float> Model() { return PoolModel(servers_); }

  std::vector<float> Gradient(int64_t n, float scale) {
    return SineGradient(n, scale);
  }

  std::vector<float> Residual(const GrpcParamClient& client) {
    std::vector<float> r;
    for (size_t s = 0; s < servers_.size(); ++s) {
      const std::vector<float> part = client.Residual(s);
      r.insert(r.end(), part.begin(), part.end());
    }
    return r;
  }

  ModelSpec spec_;
  std::vector<std::unique_ptr<GrpcServer>> servers_;
  std::vector<std::string> addresses_;
};

TEST_F(CompressedPushTest, ClientsUseOnlyWhatEveryServerAccepts) {
  PoolSettings settings;
  settings.compressed = false;
  Start(settings);
  for (PushEncoding encoding : {PushEncoding::kOneBit, PushEncoding::kTopK}) {
    auto refused = Connect(encoding);
    ASSERT_FALSE(refused.ok());
    EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_NE(refused.status().message().find(
                  absl::StrCat("does not accept ", PushEncodingName(encoding))),
              absl::string_view::npos)
        << refused.status();
  }
  // Float pushes still work with such a server.
  auto plain = Connect(PushEncoding::kFloat32);
  ASSERT_TRUE(plain.ok()) << plain.status();
  std::vector<float> params((*plain)->layout().total_size());
  std::vector<uint64_t> versions;
  ASSERT_TRUE((*plain)->Pull(absl::MakeSpan(params), &versions).ok());
  auto pushed = (*plain)->Push(Gradient(params.size(), 1.0f), versions, 1);
  ASSERT_TRUE(pushed.ok()) << pushed.status();
  EXPECT_EQ(pushed->applied, 2);
  // A top-k fraction outside (0, 0.25] is refused before connecting.
  PoolClientOptions bad;
  bad.push_encoding = PushEncoding::kTopK;
  bad.top_k_fraction = 0.5;
  EXPECT_EQ(GrpcParamClient::Create(addresses_, bad).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// A server that describes itself without PushStream/PullStream (protocol 1,
// older than the client's one transport), or with a protocol version the
// client does not speak, is refused when the client connects.
class OldServer final : public asgd::v1::ParameterServer::Service {
 public:
  OldServer(asgd::v1::ModelDescription d, bool streams, uint32_t protocol)
      : d_(std::move(d)) {
    d_.set_streams(streams);
    d_.set_protocol_version(protocol);
  }
  grpc::Status DescribeModel(grpc::ServerContext*,
                             const asgd::v1::DescribeModelRequest*,
                             asgd::v1::ModelDescription* out) override {
    *out = d_;
    return grpc::Status::OK;
  }

 private:
  asgd::v1::ModelDescription d_;
};

TEST_F(CompressedPushTest, AServerOfAnotherProtocolIsRefused) {
  PoolSettings settings;
  settings.num_servers = 1;
  Start(settings);
  asgd::v1::ModelDescription d;
  {
    auto stub = asgd::v1::ParameterServer::NewStub(grpc::CreateChannel(
        addresses_[0], grpc::InsecureChannelCredentials()));
    grpc::ClientContext ctx;
    ASSERT_TRUE(stub->DescribeModel(&ctx, {}, &d).ok());
  }
  EXPECT_EQ(d.protocol_version(), 2u);
  struct Case {
    bool streams;
    uint32_t protocol;
    const char* says;
  };
  for (const Case& c : {Case{false, 0, "too old"},
                        Case{true, 3, "speaks protocol version 3"}}) {
    OldServer old(d, c.streams, c.protocol);
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(),
                             &port);
    builder.RegisterService(&old);
    std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
    ASSERT_NE(server, nullptr);
    PoolClientOptions o;
    o.connect_timeout = absl::Seconds(30);
    auto client =
        GrpcParamClient::Create({absl::StrCat("127.0.0.1:", port)}, o);
    EXPECT_EQ(client.status().code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_NE(client.status().message().find(c.says), absl::string_view::npos)
        << client.status();
    server->Shutdown();
  }
}

// Through the client, both servers and their shards: every push moves the
// model by the learning rate times what it decoded to, which is the gradient
// plus the residual before minus the residual after (error feedback).
TEST_F(CompressedPushTest, CompressedPushesApplyWhatTheyCarry) {
  Start();
  for (PushEncoding encoding : {PushEncoding::kOneBit, PushEncoding::kTopK}) {
    {
      auto client = Connect(encoding);
      ASSERT_TRUE(client.ok()) << client.status();
      EXPECT_EQ((*client)->push_encoding(), encoding);
      const int64_t n = (*client)->layout().total_size();
      std::vector<float> params(n);
      std::vector<uint64_t> versions;
      ASSERT_TRUE((*client)->Pull(absl::MakeSpan(params), &versions).ok());
      std::vector<float> residual(n, 0.0f);
      for (int step = 0; step < 3; ++step) {
        const std::vector<float> before = Model();
        const std::vector<float> g = Gradient(n, 0.01f * (step + 1));
        auto pushed = (*client)->Push(g, versions, 1);
        ASSERT_TRUE(pushed.ok()) << pushed.status();
        EXPECT_EQ(pushed->applied, 2);
        const std::vector<float> after = Model();
        const std::vector<float> residual_after = Residual(**client);
        for (int64_t i = 0; i < n; ++i) {
          const double sent = double(g[i]) + residual[i] - residual_after[i];
          ASSERT_NEAR(after[i], before[i] - kLearningRate * sent,
                      1e-6 * (1 + std::fabs(before[i])))
              << PushEncodingName(encoding) << " step " << step << " element "
              << i;
        }
        residual = residual_after;
        ASSERT_TRUE((*client)->Pull(absl::MakeSpan(params), &versions).ok());
        EXPECT_EQ(params, Model());
      }
      // Some of the gradient waits in the residual.
      double kept = 0;
      for (float r : residual) kept += std::fabs(r);
      EXPECT_GT(kept, 0);
    }
  }
}

// The interface in encoded parts: the caller's own encoder (and residual)
// makes each server's part, the client only carries them, and the caller
// settles each part with the reply; the servers apply what the parts decode
// to.
TEST_F(CompressedPushTest, EncodedPushesFromTheCallersOwnEncoder) {
  Start();
  auto client = Connect(PushEncoding::kFloat32);
  ASSERT_TRUE(client.ok()) << client.status();
  const ModelLayout& layout = (*client)->layout();
  const int64_t n = layout.total_size();
  std::vector<float> params(n);
  std::vector<uint64_t> versions;
  ASSERT_TRUE((*client)->Pull(absl::MakeSpan(params), &versions).ok());
  PushEncoderOptions o;
  o.push_encoding = PushEncoding::kOneBit;
  o.max_chunk_elements = 4096;
  o.compressed_chunk_elements = 4096;
  auto encoder = PushEncoder::Create(layout, o);
  ASSERT_TRUE(encoder.ok()) << encoder.status();
  const std::vector<float> g = Gradient(n, 0.02f);
  std::vector<ServerPush> parts;
  for (int s = 0; s < 2; ++s) {
    auto part = (*encoder)->Encode(s, g, PushKind::kGradient);
    ASSERT_TRUE(part.ok()) << part.status();
    parts.push_back(*std::move(part));
  }
  const std::vector<float> before = Model();
  auto replies = (*client)->PushEncoded(parts, versions, 1);
  ASSERT_EQ(replies.size(), 2u);
  std::vector<float> residual;
  for (int s = 0; s < 2; ++s) {
    ASSERT_TRUE(replies[s].ok()) << replies[s].status();
    EXPECT_TRUE(replies[s]->applied);
    (*encoder)->Settle(s, parts[s], replies[s]->applied);
    const std::vector<float> r = (*encoder)->Residual(s);
    residual.insert(residual.end(), r.begin(), r.end());
  }
  const std::vector<float> after = Model();
  ASSERT_EQ(static_cast<int64_t>(residual.size()), n);
  for (int64_t i = 0; i < n; ++i) {
    ASSERT_NEAR(after[i], before[i] - kLearningRate * (g[i] - residual[i]),
                1e-6 * (1 + std::fabs(before[i])))
        << i;
  }
  // One part per server, or nothing is sent.
  parts.pop_back();
  for (const auto& r : (*client)->PushEncoded(parts, versions, 1)) {
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  }
  EXPECT_EQ(Model(), after);
}

// A push a server does not apply goes back into that server's residual, so
// the next push carries it: refused (another stream holds the address's only
// slot), or dropped as too stale.
TEST_F(CompressedPushTest, PushesThatAreNotAppliedGoBackIntoTheResidual) {
  PoolSettings settings;
  settings.num_servers = 1;
  settings.max_staleness = 1;
  settings.service.max_pushes_per_peer = 1;
  Start(settings);
  auto client = Connect(PushEncoding::kOneBit);
  ASSERT_TRUE(client.ok()) << client.status();
  const int64_t n = (*client)->layout().total_size();
  std::vector<float> params(n);
  std::vector<uint64_t> versions;
  ASSERT_TRUE((*client)->Pull(absl::MakeSpan(params), &versions).ok());
  const std::vector<float> g = Gradient(n, 0.02f);
  // Another push stream from this address holds the only slot.
  auto stub = asgd::v1::ParameterServer::NewStub(grpc::CreateChannel(
      addresses_[0], grpc::InsecureChannelCredentials()));
  {
    grpc::ClientContext ctx;
    auto holder = stub->PushStream(&ctx);
    const absl::Time deadline = absl::Now() + absl::Seconds(30);
    while (servers_[0]->service()->pushes_in_flight() < 1 &&
           absl::Now() < deadline) {
      absl::SleepFor(absl::Milliseconds(5));  // polling a condition, bounded
    }
    ASSERT_EQ(servers_[0]->service()->pushes_in_flight(), 1);
    const std::vector<float> before = Model();
    auto refused = (*client)->Push(g, versions, 1);
    ASSERT_FALSE(refused.ok());
    EXPECT_EQ(RefusalOf(refused.status()), Refusal::kPeerLimit)
        << refused.status();
    EXPECT_EQ(Model(), before);
    // The whole gradient is back in the residual (up to float rounding).
    const std::vector<float> residual = Residual(**client);
    for (int64_t i = 0; i < n; ++i) {
      ASSERT_NEAR(residual[i], g[i], 1e-7 + 1e-6 * std::fabs(g[i])) << i;
    }
    ctx.TryCancel();
    holder->Finish();
    // The server gives the slot back when it sees the cancellation, which
    // can be after the client's Finish returns.
    while (servers_[0]->service()->pushes_in_flight() > 0 &&
           absl::Now() < deadline) {
      absl::SleepFor(absl::Milliseconds(5));  // polling a condition, bounded
    }
    ASSERT_EQ(servers_[0]->service()->pushes_in_flight(), 0);
  }
  // Dropped as too stale (two versions behind): back in the residual too.
  for (int i = 0; i < 2; ++i) {
    auto pushed = (*client)->Push(std::vector<float>(n, 0.0f), versions, 1);
    ASSERT_TRUE(pushed.ok()) << pushed.status();
    ASSERT_TRUE((*client)->Pull(absl::MakeSpan(params), &versions).ok());
  }
  const std::vector<float> residual_before = Residual(**client);
  const std::vector<float> before = Model();
  const std::vector<uint64_t> stale = {versions[0] - 2};
  auto dropped = (*client)->Push(g, stale, 1);
  ASSERT_TRUE(dropped.ok()) << dropped.status();
  EXPECT_EQ(dropped->dropped, 1);
  EXPECT_TRUE(dropped->pull_required);
  EXPECT_EQ(Model(), before);
  const std::vector<float> residual = Residual(**client);
  for (int64_t i = 0; i < n; ++i) {
    ASSERT_NEAR(residual[i], residual_before[i] + g[i],
                1e-6 * (1 + std::fabs(g[i]) + std::fabs(residual_before[i])))
        << i;
  }
}

// An operation on a stream that misses its deadline cancels the stream
// (DEADLINE_EXCEEDED; the push is handed back to the residual) and the next
// one opens a new stream. Here a synchronous server waits for a second
// worker that never comes.
TEST_F(CompressedPushTest, AStreamOperationPastItsDeadlineIsCancelled) {
  PoolSettings settings;
  settings.num_servers = 1;
  settings.sync_workers = 2;
  Start(settings);
  auto client = Connect(PushEncoding::kOneBit,
                        /*rpc_timeout=*/absl::Milliseconds(300));
  ASSERT_TRUE(client.ok()) << client.status();
  const int64_t n = (*client)->layout().total_size();
  std::vector<float> params(n);
  std::vector<uint64_t> versions;
  ASSERT_TRUE((*client)->Pull(absl::MakeSpan(params), &versions).ok());
  const std::vector<float> g = Gradient(n, 0.03f);
  const absl::Time start = absl::Now();
  auto pushed = (*client)->Push(g, versions, 1);
  ASSERT_FALSE(pushed.ok());
  EXPECT_EQ(pushed.status().code(), absl::StatusCode::kDeadlineExceeded)
      << pushed.status();
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(300));
  const std::vector<float> residual = Residual(**client);
  for (int64_t i = 0; i < n; ++i) {
    ASSERT_NEAR(residual[i], g[i], 1e-7 + 1e-6 * std::fabs(g[i])) << i;
  }
  // The pull stream is untouched and the next pull works.
  ASSERT_TRUE((*client)->Pull(absl::MakeSpan(params), &versions).ok());
}

// Streams are opened once and reused; when the server closes them as idle,
// the next push and pull reopen them and go through.
TEST_F(CompressedPushTest, StreamsAreReusedAndReopenedAfterAnIdleClose) {
  PoolSettings settings;
  settings.num_servers = 1;
  settings.service.stream_idle_timeout = absl::Milliseconds(200);
  Start(settings);
  auto client = Connect(PushEncoding::kFloat32);
  ASSERT_TRUE(client.ok()) << client.status();
  const int64_t n = (*client)->layout().total_size();
  std::vector<float> params(n);
  std::vector<uint64_t> versions;
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE((*client)->Pull(absl::MakeSpan(params), &versions).ok());
    auto pushed = (*client)->Push(Gradient(n, 0.01f), versions, 1);
    ASSERT_TRUE(pushed.ok()) << pushed.status();
  }
  EXPECT_EQ((*client)->streams_opened(), 2);
  // Wait (bounded) until the server has closed both as idle.
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while ((servers_[0]->service()->pushes_in_flight() > 0 ||
          servers_[0]->service()->pull_streams_open() > 0) &&
         absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(10));  // polling a condition, bounded
  }
  ASSERT_EQ(servers_[0]->service()->pushes_in_flight(), 0);
  ASSERT_EQ(servers_[0]->service()->pull_streams_open(), 0);
  const uint64_t version = servers_[0]->store()->version();
  auto pushed = (*client)->Push(Gradient(n, 0.01f), versions, 1);
  ASSERT_TRUE(pushed.ok()) << pushed.status();
  EXPECT_EQ(pushed->applied, 1);
  ASSERT_TRUE((*client)->Pull(absl::MakeSpan(params), &versions).ok());
  EXPECT_EQ(versions[0], version + 1);  // applied once, not twice
  EXPECT_EQ((*client)->streams_opened(), 4);
}

}  // namespace
}  // namespace asgd
