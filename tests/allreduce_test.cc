// Ring allreduce among workers in one process over real gRPC (127.0.0.1,
// port 0): the result is the reference sum, bitwise the same on every
// worker, for several worker counts and odd sizes (segments of unequal and
// zero length, chunks smaller than segments), over consecutive iterations.
#include "worker/peer/allreduce.h"

#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "worker/peer/peer_grpc_client.h"
#include "worker/peer/peer_grpc_service.h"

namespace asgd {
namespace {

TEST(AllreduceSegmentTest, SegmentsTileTheVector) {
  for (int64_t size : {0, 1, 3, 7, 100, 1001}) {
    for (int n = 1; n <= 6; ++n) {
      int64_t next = 0;
      for (int k = 0; k < n; ++k) {
        const FlatRange r = AllreduceSegment(size, n, k);
        EXPECT_EQ(r.begin, next);
        EXPECT_GE(r.size(), size / n);
        EXPECT_LE(r.size(), size / n + 1);
        next = r.end;
      }
      EXPECT_EQ(next, size);
    }
  }
  // Each round every worker sends a different segment (a permutation).
  for (int n = 2; n <= 6; ++n) {
    for (int round = 0; round < AllreduceRounds(n); ++round) {
      std::vector<bool> used(n, false);
      for (int s = 0; s < n; ++s) {
        const int k = AllreduceSegmentSent(s, round, n);
        ASSERT_FALSE(used[k]);
        used[k] = true;
      }
    }
  }
}

TEST(AllreduceMailboxTest, ChecksSenderRoundAndSize) {
  AllreduceMailbox box(/*rank=*/1, /*num_workers=*/3, /*size=*/10);
  EXPECT_FALSE(box.ExpectedRange(2, 0).ok());  // not the left neighbour
  EXPECT_FALSE(box.ExpectedRange(0, 4).ok());  // rounds are 0..3
  const FlatRange r = *box.ExpectedRange(0, 0);
  EXPECT_EQ(box.Deliver(0, 0, std::vector<float>(r.size() + 1)).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(box.Deliver(0, 0, std::vector<float>(r.size(), 1.0f)).ok());
  EXPECT_EQ(box.Deliver(0, 0, std::vector<float>(r.size())).code(),
            absl::StatusCode::kInvalidArgument);  // duplicate
  auto got = box.Take(0, 0, absl::Now() + absl::Seconds(5));
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(*got, std::vector<float>(r.size(), 1.0f));
  EXPECT_EQ(
      box.Take(0, 1, absl::Now() + absl::Milliseconds(50)).status().code(),
      absl::StatusCode::kDeadlineExceeded);
}

// n workers with peer servers and clients, in one process.
class Ring {
 public:
  Ring(const ModelLayout* layout, int n, int64_t max_chunk) : layout_(layout) {
    std::vector<std::string> addresses;
    for (int i = 0; i < n; ++i) {
      mailboxes_.push_back(
          std::make_unique<AllreduceMailbox>(i, n, layout->total_size()));
      PeerServerOptions o;
      o.host = "127.0.0.1";
      o.group = GroupOf(i, n);
      o.max_chunk_elements = max_chunk;
      auto server = PeerServer::Start(o, layout, nullptr,
                                      mailboxes_.back().get(), nullptr);
      EXPECT_TRUE(server.ok()) << server.status();
      addresses.push_back(absl::StrCat("127.0.0.1:", (*server)->port()));
      servers_.push_back(*std::move(server));
    }
    // Clients connect concurrently: each waits for the others' check.
    clients_.resize(n);
    std::vector<std::thread> threads;
    for (int i = 0; i < n; ++i) {
      threads.emplace_back([&, i] {
        GrpcPeerClientOptions o;
        o.group = GroupOf(i, n);
        o.connect_timeout = absl::Seconds(20);
        o.max_chunk_elements = max_chunk;
        auto client = GrpcPeerClient::Create(addresses, layout_, o);
        EXPECT_TRUE(client.ok()) << client.status();
        if (client.ok()) clients_[i] = *std::move(client);
      });
    }
    for (auto& t : threads) t.join();
  }

  // Runs one allreduce of data[i] on worker i, concurrently.
  std::vector<absl::Status> Allreduce(uint64_t iteration,
                                      std::vector<std::vector<float>>* data) {
    const int n = static_cast<int>(clients_.size());
    std::vector<absl::Status> status(n);
    std::vector<std::thread> threads;
    for (int i = 0; i < n; ++i) {
      threads.emplace_back([&, i] {
        status[i] =
            RingAllreduce(clients_[i].get(), mailboxes_[i].get(), iteration,
                          absl::MakeSpan((*data)[i]), absl::Seconds(20));
      });
    }
    for (auto& t : threads) t.join();
    return status;
  }

 private:
  PeerGroup GroupOf(int i, int n) const {
    PeerGroup g;
    g.worker_index = i;
    g.num_workers = n;
    g.layout_fingerprint = layout_->Fingerprint();
    g.mode = "allreduce";
    return g;
  }

  const ModelLayout* layout_;
  std::vector<std::unique_ptr<AllreduceMailbox>> mailboxes_;
  std::vector<std::unique_ptr<PeerServer>> servers_;
  std::vector<std::unique_ptr<GrpcPeerClient>> clients_;
};

struct Case {
  int workers;
  std::vector<TensorSpec> tensors;
  int64_t max_chunk;
};

class RingAllreduceTest : public ::testing::TestWithParam<Case> {};

TEST_P(RingAllreduceTest, MatchesTheReferenceSumOnEveryWorker) {
  const Case& c = GetParam();
  const ModelLayout layout = *ModelLayout::Create(c.tensors, 1, 1);
  const int n = c.workers;
  const int64_t size = layout.total_size();
  Ring ring(&layout, n, c.max_chunk);
  std::mt19937 rng(n * 1000 + size);
  std::normal_distribution<float> d(0, 1);
  for (uint64_t iteration = 0; iteration < 3; ++iteration) {
    std::vector<std::vector<float>> data(n, std::vector<float>(size));
    std::vector<double> want(size, 0.0);
    for (int i = 0; i < n; ++i) {
      for (int64_t k = 0; k < size; ++k) {
        data[i][k] = d(rng);
        want[k] += data[i][k];
      }
    }
    for (const absl::Status& s : ring.Allreduce(iteration, &data)) {
      ASSERT_TRUE(s.ok()) << s;
    }
    for (int64_t k = 0; k < size; ++k) {
      ASSERT_NEAR(data[0][k], want[k], 1e-5 * n) << "element " << k;
    }
    for (int i = 1; i < n; ++i) {
      ASSERT_EQ(
          std::memcmp(data[i].data(), data[0].data(), size * sizeof(float)), 0)
          << "worker " << i << " differs from worker 0";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Sizes, RingAllreduceTest,
    ::testing::Values(
        Case{2, {{"w", {7, 11}}, {"b", {7}}}, 8},
        Case{3, {{"w", {10, 100}}, {"b", {1}}}, 64},
        Case{4, {{"w", {31, 33}}, {"b", {31}}, {"v", {3, 31}}}, 100},
        Case{5, {{"w", {3}}}, 2},  // fewer elements than workers
        Case{5, {{"w", {333, 7}}, {"b", {13}}}, 1000}));

TEST(RingAllreduceFailureTest, ADeadNeighbourFailsAtTheDeadline) {
  const ModelLayout layout = *ModelLayout::Create({{"w", {100}}}, 1, 1);
  AllreduceMailbox box(0, 2, 100);
  PeerGroup g;
  g.num_workers = 2;
  g.layout_fingerprint = layout.Fingerprint();
  g.mode = "allreduce";
  PeerServerOptions o;
  o.host = "127.0.0.1";
  o.group = g;
  auto mine = PeerServer::Start(o, &layout, nullptr, &box, nullptr);
  ASSERT_TRUE(mine.ok());
  o.group.worker_index = 1;
  AllreduceMailbox other_box(1, 2, 100);
  auto other = PeerServer::Start(o, &layout, nullptr, &other_box, nullptr);
  ASSERT_TRUE(other.ok());
  GrpcPeerClientOptions co;
  co.group = g;
  co.connect_timeout = absl::Seconds(10);
  auto client =
      GrpcPeerClient::Create({absl::StrCat("127.0.0.1:", (*mine)->port()),
                              absl::StrCat("127.0.0.1:", (*other)->port())},
                             &layout, co);
  ASSERT_TRUE(client.ok()) << client.status();
  // Worker 1 stores the message but never sends its own.
  std::vector<float> data(100, 1.0f);
  absl::Status s = RingAllreduce(client->get(), &box, 0, absl::MakeSpan(data),
                                 absl::Milliseconds(300));
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded) << s;
  // And once it is gone, sending fails at once.
  (*other)->Shutdown();
  s = RingAllreduce(client->get(), &box, 1, absl::MakeSpan(data),
                    absl::Seconds(30));
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
}

}  // namespace
}  // namespace asgd
