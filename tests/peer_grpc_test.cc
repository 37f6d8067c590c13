// The Peer service over real gRPC on 127.0.0.1 (port 0): exact two-worker
// averaging, the group check, rejected transfers that leave the model
// untouched, and the end-of-training barrier.
#include <chrono>
#include <cstring>
#include <future>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/model_layout.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "proto/peer.grpc.pb.h"
#include "worker/peer/peer_grpc_client.h"
#include "worker/peer/peer_grpc_service.h"
#include "worker/peer/peer_grpc_wire.h"
#include "worker/peer/peer_model.h"

namespace asgd {
namespace {

ModelLayout TestLayout() {
  // Odd sizes, several tensors.
  return *ModelLayout::Create({{"layer0/weight", {3, 7}},
                               {"layer0/bias", {3}},
                               {"layer1/weight", {5, 3}},
                               {"layer1/bias", {5}}},
                              1, 1);
}

std::vector<float> Random(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0, 2);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

std::vector<float> Values(const PeerModel& m) {
  std::vector<float> v(m.size());
  m.Read(absl::MakeSpan(v));
  return v;
}

bool BitwiseEqual(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() &&
         std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

PeerGroup Group(const ModelLayout& layout, int index, int n,
                const std::string& mode = "adpsgd") {
  PeerGroup g;
  g.worker_index = index;
  g.num_workers = n;
  g.layout_fingerprint = layout.Fingerprint();
  g.mode = mode;
  g.topology = mode == "adpsgd" ? "fixed_ring" : "";
  g.topology_seed = mode == "adpsgd" ? 1 : 0;
  return g;
}

class PeerGrpcTest : public ::testing::Test {
 protected:
  // Starts `n` peer servers over `models` (adpsgd).
  void StartServers(int n, std::vector<PeerModel*> models,
                    int64_t max_chunk = 4) {
    for (int i = 0; i < n; ++i) {
      PeerServerOptions o;
      o.host = "127.0.0.1";
      o.port = 0;
      o.group = Group(layout_, i, n);
      o.max_chunk_elements = max_chunk;
      auto server = PeerServer::Start(o, &layout_, models[i], nullptr, nullptr);
      ASSERT_TRUE(server.ok()) << server.status();
      addresses_.push_back(absl::StrCat("127.0.0.1:", (*server)->port()));
      servers_.push_back(*std::move(server));
    }
  }

  std::unique_ptr<GrpcPeerClient> Client(int index, int n,
                                         int64_t max_chunk = 4) {
    GrpcPeerClientOptions o;
    o.group = Group(layout_, index, n);
    o.connect_timeout = absl::Seconds(10);
    o.average_timeout = absl::Seconds(10);
    o.max_chunk_elements = max_chunk;
    auto client = GrpcPeerClient::Create(addresses_, &layout_, o);
    EXPECT_TRUE(client.ok()) << client.status();
    return client.ok() ? *std::move(client) : nullptr;
  }

  std::unique_ptr<asgd::v1::Peer::Stub> RawStub(int i) {
    return asgd::v1::Peer::NewStub(
        grpc::CreateChannel(addresses_[i], grpc::InsecureChannelCredentials()));
  }

  const ModelLayout layout_ = TestLayout();
  std::vector<std::string> addresses_;
  std::vector<std::unique_ptr<PeerServer>> servers_;
};

TEST_F(PeerGrpcTest, TwoWorkerAveragingIsExact) {
  const int64_t n = layout_.total_size();
  std::vector<float> va = Random(n, 1), vb = Random(n, 2);
  va[0] = 0.0f;
  vb[0] = -0.0f;
  va[1] = std::numeric_limits<float>::denorm_min();
  vb[1] = -std::numeric_limits<float>::denorm_min();
  va[2] = 1e30f;
  vb[2] = -1e-30f;
  PeerModel a(va), b(vb);
  StartServers(2, {&a, &b});
  auto client = Client(0, 2);
  ASSERT_NE(client, nullptr);

  std::vector<float> sent = Values(a), theirs(n);
  ASSERT_TRUE(client->Average(1, 0, sent, absl::MakeSpan(theirs)).ok());
  a.AverageAsInitiator(sent, theirs);

  std::vector<float> want(n);
  for (int64_t i = 0; i < n; ++i) want[i] = (va[i] + vb[i]) * 0.5f;
  EXPECT_TRUE(BitwiseEqual(theirs, vb));
  EXPECT_TRUE(BitwiseEqual(Values(a), want));
  EXPECT_TRUE(BitwiseEqual(Values(b), want));
  EXPECT_EQ(servers_[1]->service()->averages_served(), 1);
  EXPECT_EQ(servers_[0]->service()->averages_served(), 0);

  // A second exchange of equal models changes nothing.
  sent = Values(a);
  ASSERT_TRUE(client->Average(1, 1, sent, absl::MakeSpan(theirs)).ok());
  a.AverageAsInitiator(sent, theirs);
  EXPECT_TRUE(BitwiseEqual(Values(a), want));
  EXPECT_TRUE(BitwiseEqual(Values(b), want));
}

TEST_F(PeerGrpcTest, ChunkLimitsMayDifferBetweenWorkers) {
  const int64_t n = layout_.total_size();
  PeerModel a(Random(n, 3)), b(Random(n, 4));
  StartServers(2, {&a, &b}, /*max_chunk=*/1000);
  auto client = Client(0, 2, /*max_chunk=*/1000);
  ASSERT_NE(client, nullptr);
  std::vector<float> sent = Values(a), theirs(n);
  ASSERT_TRUE(client->Average(1, 0, sent, absl::MakeSpan(theirs)).ok());
  a.AverageAsInitiator(sent, theirs);
  EXPECT_TRUE(BitwiseEqual(Values(a), Values(b)));
}

TEST_F(PeerGrpcTest, GroupCheckRejectsMismatches) {
  const int64_t n = layout_.total_size();
  PeerModel a(Random(n, 1)), b(Random(n, 2));
  StartServers(2, {&a, &b});
  GrpcPeerClientOptions o;
  o.group = Group(layout_, 0, 2);
  o.connect_timeout = absl::Seconds(10);

  GrpcPeerClientOptions other_seed = o;
  other_seed.group.topology_seed = 2;
  auto c1 = GrpcPeerClient::Create(addresses_, &layout_, other_seed);
  EXPECT_EQ(c1.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(c1.status().message().find("topology seed"), std::string::npos)
      << c1.status();

  GrpcPeerClientOptions other_model = o;
  other_model.group.layout_fingerprint = "0123";
  auto c2 = GrpcPeerClient::Create(addresses_, &layout_, other_model);
  EXPECT_EQ(c2.status().code(), absl::StatusCode::kFailedPrecondition);

  // Addresses out of worker-index order: worker 1 is listed at index 0.
  std::vector<std::string> swapped = {addresses_[1], addresses_[0]};
  auto c3 = GrpcPeerClient::Create(swapped, &layout_, o);
  EXPECT_EQ(c3.status().code(), absl::StatusCode::kFailedPrecondition)
      << c3.status();

  auto c4 = GrpcPeerClient::Create({addresses_[0]}, &layout_, o);
  EXPECT_EQ(c4.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(PeerGrpcTest, BadTransfersLeaveTheModelUntouched) {
  const int64_t n = layout_.total_size();
  const std::vector<float> vb = Random(n, 2);
  PeerModel a(Random(n, 1)), b(vb);
  StartServers(2, {&a, &b});
  auto stub = RawStub(1);
  const std::vector<float> mine = Random(n, 5);

  // Sends `messages` as worker 0 and returns the call's status.
  auto send = [&](const std::vector<asgd::v1::PeerMessage>& messages) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() +
                     std::chrono::seconds(10));
    auto stream = stub->Average(&ctx);
    for (const auto& m : messages) {
      if (!stream->Write(m)) break;
    }
    stream->WritesDone();
    asgd::v1::PeerMessage reply;
    while (stream->Read(&reply)) {
    }
    return stream->Finish();
  };
  auto transfer = [&](asgd::v1::PeerHeader header, FlatRange range) {
    OutgoingTransfer out(&layout_, std::move(header), range,
                         mine.data() + range.begin, 4);
    std::vector<asgd::v1::PeerMessage> messages(out.num_messages());
    for (size_t i = 0; i < messages.size(); ++i) out.Fill(i, &messages[i]);
    return messages;
  };
  asgd::v1::PeerHeader header;
  header.set_worker_index(0);
  header.set_layout_fingerprint(layout_.Fingerprint());

  // Not the whole model.
  EXPECT_EQ(send(transfer(header, {0, n - 1})).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  // Missing commit.
  auto no_commit = transfer(header, {0, n});
  no_commit.pop_back();
  EXPECT_EQ(send(no_commit).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  // A chunk dropped (the commit's count and the coverage disagree).
  auto gap = transfer(header, {0, n});
  gap.erase(gap.begin() + 2);
  EXPECT_EQ(send(gap).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  // NaN.
  auto nan = transfer(header, {0, n});
  std::string* data = nan[1].mutable_chunk()->mutable_data();
  const float q = std::numeric_limits<float>::quiet_NaN();
  std::memcpy(data->data(), &q, sizeof(float));
  EXPECT_EQ(send(nan).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  // From itself, and from a worker outside the group.
  asgd::v1::PeerHeader self = header;
  self.set_worker_index(1);
  EXPECT_EQ(send(transfer(self, {0, n})).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  self.set_worker_index(7);
  EXPECT_EQ(send(transfer(self, {0, n})).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  // Another model.
  asgd::v1::PeerHeader other = header;
  other.set_layout_fingerprint("feed");
  EXPECT_EQ(send(transfer(other, {0, n})).error_code(),
            grpc::StatusCode::FAILED_PRECONDITION);

  EXPECT_TRUE(BitwiseEqual(Values(b), vb));
  EXPECT_EQ(servers_[1]->service()->averages_served(), 0);

  // The same transfer done right is averaged.
  EXPECT_TRUE(send(transfer(header, {0, n})).ok());
  EXPECT_EQ(servers_[1]->service()->averages_served(), 1);
}

TEST_F(PeerGrpcTest, AllreduceWorkerRefusesToAverage) {
  PeerServerOptions o;
  o.host = "127.0.0.1";
  o.group = Group(layout_, 1, 2, "allreduce");
  AllreduceMailbox mailbox(1, 2, layout_.total_size());
  auto server = PeerServer::Start(o, &layout_, nullptr, &mailbox, nullptr);
  ASSERT_TRUE(server.ok()) << server.status();
  addresses_ = {"127.0.0.1:1", absl::StrCat("127.0.0.1:", (*server)->port())};
  GrpcPeerClientOptions co;
  co.group = Group(layout_, 0, 2, "allreduce");
  co.connect_timeout = absl::Seconds(10);
  auto client = GrpcPeerClient::Create(addresses_, &layout_, co);
  ASSERT_TRUE(client.ok()) << client.status();
  std::vector<float> mine(layout_.total_size()), theirs(layout_.total_size());
  EXPECT_EQ((*client)->Average(1, 0, mine, absl::MakeSpan(theirs)).code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST_F(PeerGrpcTest, AwaitPeersDoneIsABarrier) {
  const int64_t n = layout_.total_size();
  PeerModel a(Random(n, 1)), b(Random(n, 2)), c(Random(n, 3));
  StartServers(3, {&a, &b, &c});
  auto client = Client(0, 3);
  ASSERT_NE(client, nullptr);
  auto waiting = std::async(std::launch::async, [&] {
    return client->AwaitPeersDone(absl::Seconds(30));
  });
  // Workers 1 and 2 are still training: the barrier holds.
  EXPECT_EQ(waiting.wait_for(std::chrono::milliseconds(200)),
            std::future_status::timeout);
  servers_[1]->MarkDone(10);
  EXPECT_EQ(waiting.wait_for(std::chrono::milliseconds(200)),
            std::future_status::timeout);
  // Worker 2 goes away without finishing: gone counts as done.
  servers_[2]->Shutdown();
  EXPECT_EQ(waiting.get(), std::vector<int>{});

  // A worker that never finishes is reported at the deadline.
  PeerModel d(Random(n, 4)), e(Random(n, 5));
  addresses_.clear();
  servers_.clear();
  StartServers(2, {&d, &e});
  auto client2 = Client(0, 2);
  ASSERT_NE(client2, nullptr);
  const absl::Time start = absl::Now();
  EXPECT_EQ(client2->AwaitPeersDone(absl::Milliseconds(300)),
            std::vector<int>{1});
  EXPECT_LT(absl::Now() - start, absl::Seconds(10));
}

}  // namespace
}  // namespace asgd
