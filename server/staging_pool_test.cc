#include "server/staging_pool.h"

#include <atomic>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace asgd {
namespace {

TEST(StagingPoolTest, ReusesReleasedBuffersUpToMaxIdle) {
  StagingPool pool(1000, /*max_idle=*/2);
  std::vector<std::shared_ptr<std::vector<float>>> held;
  for (int i = 0; i < 3; ++i) held.push_back(pool.Acquire());
  for (const auto& b : held) EXPECT_EQ(b->size(), 1000u);
  EXPECT_EQ(pool.allocations(), 3);
  const float* first = held[0]->data();
  (*held[0])[7] = 42.0f;
  held.clear();  // 2 kept, 1 freed
  EXPECT_EQ(pool.idle(), 2);
  auto again = pool.Acquire();
  auto again2 = pool.Acquire();
  EXPECT_EQ(pool.allocations(), 3);  // both reused
  EXPECT_TRUE(again->data() == first || again2->data() == first);
  auto fresh = pool.Acquire();
  EXPECT_EQ(pool.allocations(), 4);
}

TEST(StagingPoolTest, NeverMoreBuffersThanTheCap) {
  StagingPool pool(1000, /*max_idle=*/1, /*max_buffers=*/3);
  std::vector<std::shared_ptr<std::vector<float>>> held;
  for (int i = 0; i < 3; ++i) held.push_back(pool.Acquire());
  for (const auto& b : held) ASSERT_NE(b, nullptr);
  EXPECT_EQ(pool.Acquire(), nullptr);  // all 3 in use
  EXPECT_EQ(pool.live(), 3);
  held.pop_back();  // kept idle: still counts, and is handed out again
  EXPECT_EQ(pool.live(), 3);
  held.push_back(pool.Acquire());
  ASSERT_NE(held.back(), nullptr);
  EXPECT_EQ(pool.allocations(), 3);
  held.clear();  // one kept idle, two freed
  EXPECT_EQ(pool.live(), 1);
  EXPECT_EQ(pool.idle(), 1);
  for (int i = 0; i < 3; ++i) held.push_back(pool.Acquire());
  for (const auto& b : held) ASSERT_NE(b, nullptr);
  EXPECT_EQ(pool.Acquire(), nullptr);
}

TEST(StagingPoolTest, ConcurrentAcquireAndReleaseNeverShareABuffer) {
  StagingPool pool(64, 4);
  std::vector<std::thread> threads;
  std::atomic<int> collisions{0};
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 2000; ++i) {
        auto b = pool.Acquire();
        // Exclusive while held: what this thread writes stays.
        for (float& v : *b) v = static_cast<float>(t);
        for (float v : *b) collisions += v != static_cast<float>(t);
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(collisions.load(), 0);
  EXPECT_LE(pool.idle(), 4);
}

}  // namespace
}  // namespace asgd
