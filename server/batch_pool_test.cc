#include "server/batch_pool.h"

#include <limits>
#include <set>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace asgd {
namespace {

TEST(BatchPoolTest, HandsOutEveryBatchOfEveryEpochOnce) {
  BatchPool pool;
  // 1000 frames / batch 64 = 15 batches per epoch; 2 epochs = 30 batches.
  std::set<uint64_t> seen;
  bool exhausted = false;
  int grants = 0;
  while (!exhausted) {
    auto g = pool.Take(grants % 2, 1000, 64, 2.0, 4);
    ASSERT_TRUE(g.ok()) << g.status();
    EXPECT_EQ(g->batches_per_epoch, 15u);
    for (uint64_t id : g->batch_ids) EXPECT_TRUE(seen.insert(id).second);
    exhausted = g->exhausted;
    ++grants;
  }
  EXPECT_EQ(seen.size(), 30u);
  EXPECT_EQ(*seen.rbegin(), 29u);
  EXPECT_EQ(pool.TakenBy(0) + pool.TakenBy(1), 30u);
  auto after = pool.Take(0, 1000, 64, 2.0, 4);
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
        auto g = pool.Take(w, 100000, 10, 1.0, 3);
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
        pool.Take(0, b.frames, b.batch, b.epochs, b.count).status().code(),
        absl::StatusCode::kInvalidArgument)
        << b.frames << " " << b.batch << " " << b.epochs << " " << b.count;
  }
  EXPECT_EQ(pool.datasets(), 0);
}

TEST(BatchPoolTest, AnotherDatasetNeitherRedefinesNorEmptiesTheSharedOne) {
  BatchPool pool;
  auto first = pool.Take(0, 1000, 64, 1, 4);
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(first->batch_ids, (std::vector<uint64_t>{0, 1, 2, 3}));
  // A client asks for a tiny dataset and takes all of it.
  auto other = pool.Take(99, 64, 64, 1, 1024);
  ASSERT_TRUE(other.ok());
  EXPECT_TRUE(other->exhausted);
  // The workers' dataset goes on where it was.
  auto next = pool.Take(1, 1000, 64, 1, 4);
  ASSERT_TRUE(next.ok());
  EXPECT_EQ(next->batch_ids, (std::vector<uint64_t>{4, 5, 6, 7}));
  EXPECT_FALSE(next->exhausted);
  EXPECT_EQ(pool.datasets(), 2);
}

TEST(BatchPoolTest, KeepsAFewDatasetsAndForgetsIdleOnes) {
  absl::Time now = absl::UnixEpoch() + absl::Hours(1);
  BatchPoolOptions o;
  o.max_datasets = 3;
  o.idle_expiry = absl::Minutes(1);
  o.clock = [&] { return now; };
  BatchPool pool(o);
  ASSERT_TRUE(pool.Take(0, 1000, 64, 1, 1).ok());  // the workers' dataset
  ASSERT_TRUE(pool.Take(9, 1001, 64, 1, 1).ok());
  ASSERT_TRUE(pool.Take(9, 1002, 64, 1, 1).ok());
  // Full, and every dataset was used just now: refused, nothing forgotten.
  EXPECT_EQ(pool.Take(9, 1003, 64, 1, 1).status().code(),
            absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(pool.datasets(), 3);
  // Two minutes later only the workers' dataset is still in use.
  now += absl::Minutes(2);
  ASSERT_TRUE(pool.Take(0, 1000, 64, 1, 1).ok());
  ASSERT_TRUE(pool.Take(9, 1003, 64, 1, 1).ok());  // replaces an idle one
  EXPECT_EQ(pool.datasets(), 3);
  auto workers = pool.Take(0, 1000, 64, 1, 1);
  ASSERT_TRUE(workers.ok());
  EXPECT_EQ(workers->batch_ids, (std::vector<uint64_t>{2}));
}

}  // namespace
}  // namespace asgd
