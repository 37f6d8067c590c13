#include "server/batch_pool.h"

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

TEST(BatchPoolTest, RejectsBadAndMismatchedRequests) {
  BatchPool pool;
  EXPECT_EQ(pool.Take(0, 0, 64, 1, 1).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(pool.Take(0, 100, 64, 0, 1).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(pool.Take(0, 100, 200, 1, 1).status().code(),
            absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(pool.Take(0, 1000, 64, 1, 1).ok());
  EXPECT_EQ(pool.Take(1, 999, 64, 1, 1).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace asgd
