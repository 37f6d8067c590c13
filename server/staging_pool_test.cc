#include "server/staging_pool.h"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <fstream>
#include <string>
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

TEST(StagingPoolTest, TheBudgetIsChargedAsBytesArriveAndGivenBackWithTheBuffer) {
  StagingPool pool(1000, /*max_idle=*/1, /*max_bytes=*/10000);
  // 16 buffers that were sent a few bytes each take a few bytes of the
  // budget, not 16 buffers' worth: another push still fits.
  std::vector<std::shared_ptr<std::vector<float>>> stalled;
  for (int i = 0; i < 16; ++i) {
    stalled.push_back(pool.Acquire());
    ASSERT_TRUE(pool.Charge(stalled.back().get(), 62));
  }
  EXPECT_EQ(pool.charged_bytes(), 16 * 62);
  auto honest = pool.Acquire();
  for (int chunk = 0; chunk < 4; ++chunk) {
    ASSERT_TRUE(pool.Charge(honest.get(), 1000)) << chunk;
  }
  EXPECT_EQ(pool.charged_bytes(), 16 * 62 + 4000);
  // Beyond the budget: refused, nothing charged.
  auto greedy = pool.Acquire();
  ASSERT_TRUE(pool.Charge(greedy.get(), 5000));
  EXPECT_FALSE(pool.Charge(greedy.get(), 10000 - 16 * 62 - 9000 + 1));
  EXPECT_EQ(pool.charged_bytes(), 16 * 62 + 9000);
  // Released buffers give their charge back, kept idle or freed.
  greedy.reset();
  honest.reset();
  EXPECT_EQ(pool.charged_bytes(), 16 * 62);
  stalled.clear();
  EXPECT_EQ(pool.charged_bytes(), 0);
  EXPECT_EQ(pool.idle(), 1);
  EXPECT_EQ(pool.live(), 1);
  // A reused buffer starts uncharged.
  auto again = pool.Acquire();
  EXPECT_EQ(pool.charged_bytes(), 0);
  EXPECT_TRUE(pool.Charge(again.get(), 10000));
  EXPECT_FALSE(pool.Charge(again.get(), 1));
}

TEST(StagingPoolTest, AcquireChargedRefusesWithoutTakingABuffer) {
  StagingPool pool(1000, /*max_idle=*/0, /*max_bytes=*/8000);
  auto a = pool.AcquireCharged(4000);
  auto b = pool.AcquireCharged(4000);
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(pool.AcquireCharged(1), nullptr);
  EXPECT_EQ(pool.allocations(), 2);  // the refusal allocated nothing
  a.reset();
  EXPECT_NE(pool.AcquireCharged(4000), nullptr);
}

// VmRSS of this process, in KiB.
int64_t RssKb() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stoll(line.substr(6));
  }
  return -1;
}

TEST(StagingPoolTest, AFreshBufferIsResidentOnlyWhereWritten) {
  // 16 buffers of 64 MiB, each written in its first 4 KiB only: far less
  // than one buffer's worth of memory, not 1 GiB.
  constexpr int64_t kElements = int64_t{16} << 20;
  StagingPool pool(kElements, /*max_idle=*/0);
  const int64_t before = RssKb();
  std::vector<std::shared_ptr<std::vector<float>>> held;
  for (int i = 0; i < 16; ++i) {
    held.push_back(pool.Acquire());
    for (int k = 0; k < 1024; ++k) (*held.back())[k] = 1.0f;
  }
  const int64_t grown = RssKb() - before;
  EXPECT_LT(grown, 32 << 10) << "KiB";
  // Written everywhere, a buffer is all there.
  std::fill(held[0]->begin(), held[0]->end(), 2.0f);
  EXPECT_GT(RssKb() - before, 60 << 10);
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
