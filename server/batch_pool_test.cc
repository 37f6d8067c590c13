#include "server/batch_pool.h"

#include <limits>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/match.h"
#include "gtest/gtest.h"

namespace asgd {
namespace {

// The workers' run: its secret, its address and its dataset.
constexpr char kRun[] = "0f1e2d3c4b5a69788796a5b4c3d2e1f0";
constexpr char kWorkers[] = "ipv4:10.0.0.7";
constexpr char kAttacker[] = "ipv4:10.0.0.66";

BatchRequest Request(uint64_t worker, uint64_t frames, uint32_t batch,
                     double epochs, uint32_t count,
                     const std::string& run_id = kRun,
                     const std::string& client = kWorkers) {
  BatchRequest r;
  r.client = client;
  r.run_id = run_id;
  r.worker_id = worker;
  r.num_frames = frames;
  r.batch_size = batch;
  r.epochs = epochs;
  r.count = count;
  return r;
}

// A made-up run id, as a client that does not know the workers' one would
// send.
std::string OtherRun(int i) { return absl::StrCat("made-up-run-id-", 1000 + i); }

TEST(BatchPoolTest, HandsOutEveryBatchOfEveryEpochOnce) {
  BatchPool pool;
  // 1000 frames / batch 64 = 15 batches per epoch; 2 epochs = 30 batches.
  std::set<uint64_t> seen;
  bool exhausted = false;
  int grants = 0;
  while (!exhausted) {
    auto g = pool.Take(Request(grants % 2, 1000, 64, 2.0, 4));
    ASSERT_TRUE(g.ok()) << g.status();
    EXPECT_EQ(g->batches_per_epoch, 15u);
    for (uint64_t id : g->batch_ids) EXPECT_TRUE(seen.insert(id).second);
    exhausted = g->exhausted;
    ++grants;
  }
  EXPECT_EQ(seen.size(), 30u);
  EXPECT_EQ(*seen.rbegin(), 29u);
  EXPECT_EQ(pool.TakenBy(0) + pool.TakenBy(1), 30u);
  auto after = pool.Take(Request(0, 1000, 64, 2.0, 4));
  ASSERT_TRUE(after.ok());
  EXPECT_TRUE(after->batch_ids.empty());
  EXPECT_TRUE(after->exhausted);
}

TEST(BatchPoolTest, ConcurrentTakersNeverShareABatch) {
  BatchPool pool;
  std::vector<std::vector<uint64_t>> got(4);
  std::vector<std::thread> threads;
  for (int w = 0; w < 4; ++w) {
    threads.emplace_back([&, w] {
      for (;;) {
        // Each worker from its own address: they share the run's dataset.
        auto g = pool.Take(Request(w, 100000, 10, 1.0, 3, kRun,
                                   absl::StrCat("ipv4:10.0.0.", w)));
        ASSERT_TRUE(g.ok());
        got[w].insert(got[w].end(), g->batch_ids.begin(), g->batch_ids.end());
        if (g->exhausted) return;
      }
    });
  }
  for (auto& t : threads) t.join();
  std::set<uint64_t> all;
  for (auto& ids : got) all.insert(ids.begin(), ids.end());
  EXPECT_EQ(all.size(), 10000u);
  size_t total = 0;
  for (auto& ids : got) total += ids.size();
  EXPECT_EQ(total, 10000u);
  EXPECT_EQ(pool.datasets(), 1);
}

TEST(BatchPoolTest, RejectsOutOfRangeRequestsWithoutChangingThePool) {
  BatchPool pool;
  const double inf = std::numeric_limits<double>::infinity();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  struct Bad {
    uint64_t frames;
    uint32_t batch;
    double epochs;
    uint32_t count;
  };
  for (const Bad& b : std::vector<Bad>{
           {0, 64, 1, 1},             // no frames
           {100, 64, 0, 1},           // no epochs
           {100, 200, 1, 1},          // batch larger than the data
           {1000, 64, 1, 0},          // nothing asked for
           {1000, 64, 1, 1025},       // too many at once
           {~uint64_t{0}, 64, 1, 1},  // 2^64-1 frames
           {1000, 64, 1e300, 1},      // the undefined conversion before
           {1000, 64, inf, 1},
           {1000, 64, nan, 1},
           {1000, 64, -1, 1},
           {uint64_t{1} << 40, 1, 1e6, 1},  // 2^60 batches
       }) {
    EXPECT_EQ(
        pool.Take(Request(0, b.frames, b.batch, b.epochs, b.count))
            .status()
            .code(),
        absl::StatusCode::kInvalidArgument)
        << b.frames << " " << b.batch << " " << b.epochs << " " << b.count;
  }
  EXPECT_EQ(pool.datasets(), 0);
}

TEST(BatchPoolTest, ARunIdIsRequiredAndNeverEchoed) {
  BatchPool pool;
  for (const std::string& run_id :
       {std::string(), std::string("guessable"), std::string(257, 'x')}) {
    auto g = pool.Take(Request(0, 1000, 64, 1, 4, run_id));
    EXPECT_EQ(g.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_TRUE(absl::StrContains(g.status().message(), "run id"))
        << g.status();
    if (!run_id.empty()) {
      EXPECT_FALSE(absl::StrContains(g.status().message(), run_id));
    }
  }
  EXPECT_EQ(pool.datasets(), 0);
}

TEST(BatchPoolTest, AForeignRunIdCannotDrainTheWorkersDataset) {
  BatchPool pool;
  auto first = pool.Take(Request(0, 1000, 64, 1, 4));
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(first->batch_ids, (std::vector<uint64_t>{0, 1, 2, 3}));
  // A client names the workers' frames, batch size and epochs (even their
  // worker id) with a run id of its own, from its address and from theirs,
  // and takes everything it can.
  int made_up = 0;
  for (const char* client : {kAttacker, kWorkers}) {
    auto stolen =
        pool.Take(Request(0, 1000, 64, 1, 1024, OtherRun(made_up++), client));
    ASSERT_TRUE(stolen.ok()) << stolen.status();
    EXPECT_EQ(stolen->batch_ids.size(), 15u);  // a dataset of its own
    EXPECT_EQ(stolen->batch_ids.front(), 0u);
  }
  // A tiny dataset of its own, used up.
  auto other = pool.Take(Request(99, 64, 64, 1, 1024, OtherRun(made_up), kAttacker));
  ASSERT_TRUE(other.ok());
  EXPECT_TRUE(other->exhausted);
  // The workers' dataset goes on where it was.
  auto next = pool.Take(Request(1, 1000, 64, 1, 4));
  ASSERT_TRUE(next.ok());
  EXPECT_EQ(next->batch_ids, (std::vector<uint64_t>{4, 5, 6, 7}));
  EXPECT_FALSE(next->exhausted);
  EXPECT_EQ(pool.datasets(), 4);
}

TEST(BatchPoolTest, OneAddressHoldsAFewDatasetsAndCannotKeepARunOut) {
  absl::Time now = absl::UnixEpoch() + absl::Hours(1);
  BatchPoolOptions o;
  o.max_datasets = 8;
  o.max_datasets_per_client = 3;
  o.idle_expiry = absl::Minutes(1);
  o.clock = [&] { return now; };
  BatchPool pool(o);
  // 100 made-up datasets from one address, each used just now: 3 kept, the
  // rest refused.
  int refused = 0;
  for (int i = 0; i < 100; ++i) {
    auto g = pool.Take(Request(9, 1000 + i, 64, 1, 1, OtherRun(i), kAttacker));
    if (!g.ok()) {
      EXPECT_EQ(g.status().code(), absl::StatusCode::kResourceExhausted);
      EXPECT_TRUE(absl::StrContains(g.status().message(), kAttacker))
          << g.status();
      ++refused;
    }
  }
  EXPECT_EQ(refused, 97);
  EXPECT_EQ(pool.datasets_of(kAttacker), 3);
  // A new run from another address gets its dataset at once, and its
  // workers (each from its own address) share it.
  auto run = pool.Take(Request(0, 1000, 64, 1, 2));
  ASSERT_TRUE(run.ok()) << run.status();
  EXPECT_EQ(run->batch_ids, (std::vector<uint64_t>{0, 1}));
  auto joined = pool.Take(Request(1, 1000, 64, 1, 2, kRun, "ipv4:10.0.0.8"));
  ASSERT_TRUE(joined.ok()) << joined.status();
  EXPECT_EQ(joined->batch_ids, (std::vector<uint64_t>{2, 3}));
  EXPECT_EQ(pool.datasets(), 4);
  // The attacker's own datasets go on being served; a new one replaces only
  // one of its own, once that one has been idle for the expiry.
  EXPECT_TRUE(pool.Take(Request(9, 1000, 64, 1, 1, OtherRun(0), kAttacker)).ok());
  now += absl::Seconds(30);
  ASSERT_TRUE(pool.Take(Request(0, 1000, 64, 1, 1)).ok());
  now += absl::Seconds(40);  // datasets 1 and 2 idle 70 s, 0 40 s
  auto replaced = pool.Take(Request(9, 5000, 64, 1, 1, OtherRun(50), kAttacker));
  ASSERT_TRUE(replaced.ok()) << replaced.status();
  EXPECT_EQ(pool.datasets_of(kAttacker), 3);
  EXPECT_EQ(pool.datasets(), 4);
  // The workers' dataset, idle for 40 s, was not touched.
  auto workers = pool.Take(Request(0, 1000, 64, 1, 1));
  ASSERT_TRUE(workers.ok());
  EXPECT_EQ(workers->batch_ids, (std::vector<uint64_t>{5}));
}

TEST(BatchPoolTest, ThePoolIsBoundedInAllAndForgetsIdleDatasets) {
  absl::Time now = absl::UnixEpoch() + absl::Hours(1);
  BatchPoolOptions o;
  o.max_datasets = 6;
  o.max_datasets_per_client = 2;
  o.idle_expiry = absl::Minutes(1);
  o.clock = [&] { return now; };
  BatchPool pool(o);
  ASSERT_TRUE(pool.Take(Request(0, 1000, 64, 1, 1)).ok());  // the workers'
  // Five more addresses, two datasets each: the pool fills at six.
  int refused = 0;
  for (int a = 0; a < 5; ++a) {
    for (int i = 0; i < 2; ++i) {
      now += absl::Seconds(1);  // the first made up is the least recently used
      auto g = pool.Take(Request(9, 2000 + i, 64, 1, 1, OtherRun(10 * a + i),
                                 absl::StrCat("ipv4:10.9.9.", a)));
      if (!g.ok()) {
        EXPECT_EQ(g.status().code(), absl::StatusCode::kResourceExhausted);
        ++refused;
      }
    }
  }
  EXPECT_EQ(pool.datasets(), 6);
  EXPECT_EQ(refused, 5);
  // Full, and every dataset was used just now: a new run is refused and
  // nothing is forgotten; its workers retry.
  const std::string run2 = "another-run-id-of-32-bytes-abcde";
  EXPECT_EQ(pool.Take(Request(0, 3000, 64, 1, 1, run2, "ipv4:10.1.1.1"))
                .status()
                .code(),
            absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(pool.datasets(), 6);
  // Two minutes later only the workers' dataset is still in use: the new
  // run replaces an idle one, never the workers'.
  now += absl::Minutes(2);
  ASSERT_TRUE(pool.Take(Request(0, 1000, 64, 1, 1)).ok());
  ASSERT_TRUE(pool.Take(Request(0, 3000, 64, 1, 1, run2, "ipv4:10.1.1.1")).ok());
  EXPECT_EQ(pool.datasets(), 6);
  auto workers = pool.Take(Request(0, 1000, 64, 1, 1));
  ASSERT_TRUE(workers.ok());
  EXPECT_EQ(workers->batch_ids, (std::vector<uint64_t>{2}));
  // The least recently used of them was forgotten: it starts over when it is
  // named again.
  auto again = pool.Take(Request(9, 2000, 64, 1, 1, OtherRun(0), "ipv4:10.9.9.0"));
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->batch_ids, (std::vector<uint64_t>{0}));
}

}  // namespace
}  // namespace asgd
