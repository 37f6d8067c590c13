#include "server/param_store.h"

#include <atomic>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"

namespace asgd {
namespace {

ParamStoreOptions Options(int num_shards, int capacity) {
  ParamStoreOptions o;
  o.tensors = {{"w", {100, 37}}, {"b", {100}}};
  o.num_servers = 2;
  o.server_index = 1;
  o.num_shards = num_shards;
  o.optimizer.learning_rate = 0.125f;  // powers of two: exact float sums
  o.queue_capacity = capacity;
  return o;
}

// Counts completed pushes and lets a test wait for a number of them.
class Completions {
 public:
  std::function<void(const PushResult&)> Callback() {
    return [this](const PushResult& r) {
      absl::MutexLock lock(&mu_);
      ++done_;
      if (r.applied) ++applied_;
    };
  }
  bool WaitFor(int n) {
    absl::MutexLock lock(&mu_);
    auto reached = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return done_ >= n;
    };
    return mu_.AwaitWithTimeout(absl::Condition(&reached), absl::Seconds(30));
  }
  int applied() {
    absl::MutexLock lock(&mu_);
    return applied_;
  }

 private:
  absl::Mutex mu_;
  int done_ ABSL_GUARDED_BY(mu_) = 0;
  int applied_ ABSL_GUARDED_BY(mu_) = 0;
};

TEST(ParamStoreTest, ConcurrentPushesAndPullsApplyEveryUpdateExactlyOnce) {
  const int kPushers = 4, kPushesEach = 50;
  auto store = ParamStore::Create(Options(3, kPushers * kPushesEach),
                                  std::vector<float>(3800, 0.0f));
  ASSERT_TRUE(store.ok()) << store.status();
  ParamStore& ps = **store;
  const int64_t n = ps.range().size();
  auto ones = std::make_shared<const std::vector<float>>(n, 1.0f);
  Completions completions;
  std::atomic<bool> stop_readers{false};
  std::atomic<int> bad_reads{0};
  std::vector<std::thread> readers;
  for (int r = 0; r < 2; ++r) {
    readers.emplace_back([&] {
      std::vector<float> buf(n);
      while (!stop_readers.load()) {
        const uint64_t v = ps.version();
        ps.Read(0, n, buf.data());
        // Every element has seen at least v updates of -0.125 and at most all.
        for (float x : buf) {
          if (x > -0.125f * v || x < -0.125f * kPushers * kPushesEach) {
            bad_reads.fetch_add(1);
          }
        }
      }
    });
  }
  std::vector<std::thread> pushers;
  for (int p = 0; p < kPushers; ++p) {
    pushers.emplace_back([&] {
      for (int i = 0; i < kPushesEach; ++i) {
        ASSERT_TRUE(ps.Submit(ps.version(), 1, ones, completions.Callback())
                        .ok());
      }
    });
  }
  for (auto& t : pushers) t.join();
  ASSERT_TRUE(completions.WaitFor(kPushers * kPushesEach));
  stop_readers = true;
  for (auto& t : readers) t.join();
  EXPECT_EQ(bad_reads.load(), 0);
  EXPECT_EQ(ps.version(), uint64_t{kPushers * kPushesEach});
  EXPECT_EQ(ps.accepted(), uint64_t{kPushers * kPushesEach});
  EXPECT_EQ(ps.stats().pushes_applied, uint64_t{kPushers * kPushesEach});
  for (float x : ps.Snapshot()) {
    ASSERT_EQ(x, -0.125f * kPushers * kPushesEach);
  }
}

TEST(ParamStoreTest, FutureVersionIsRejectedAndChangesNothing) {
  auto store = ParamStore::Create(Options(2, 4), std::vector<float>(3800, 1));
  ASSERT_TRUE(store.ok());
  const auto before = (*store)->Snapshot();
  auto g = std::make_shared<const std::vector<float>>((*store)->range().size(),
                                                      1.0f);
  bool called = false;
  absl::Status s =
      (*store)->Submit(5, 1, g, [&](const PushResult&) { called = true; });
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("future"), absl::string_view::npos) << s;
  EXPECT_FALSE(called);
  EXPECT_EQ((*store)->stats().rejected[static_cast<int>(
                RejectReason::kFutureVersion)],
            1u);
  (*store)->Shutdown();
  EXPECT_EQ((*store)->Snapshot(), before);
}

TEST(ParamStoreTest, WrongSizeIsRejected) {
  auto store = ParamStore::Create(Options(2, 4), std::vector<float>(3800, 1));
  ASSERT_TRUE(store.ok());
  auto g = std::make_shared<const std::vector<float>>(7, 1.0f);
  EXPECT_EQ((*store)->Submit(0, 1, g, [](const PushResult&) {}).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(ParamStore::Create(Options(2, 4), std::vector<float>(10)).ok());
}

TEST(ParamStoreTest, TooStalePushIsDroppedAndCounted) {
  ParamStoreOptions o = Options(2, 16);
  o.max_staleness = 1;
  auto store = ParamStore::Create(o, std::vector<float>(3800, 0.0f));
  ASSERT_TRUE(store.ok());
  auto g = std::make_shared<const std::vector<float>>((*store)->range().size(),
                                                      1.0f);
  std::vector<PushResult> results;
  absl::Mutex mu;
  auto record = [&](const PushResult& r) {
    absl::MutexLock lock(&mu);
    results.push_back(r);
  };
  // Three pushes all computed from version 0: staleness 0, 1, 2.
  for (int i = 0; i < 3; ++i) ASSERT_TRUE((*store)->Submit(0, 1, g, record).ok());
  (*store)->Shutdown();  // drains the queues
  ASSERT_EQ(results.size(), 3u);
  int applied = 0, dropped = 0;
  for (const PushResult& r : results) {
    if (r.applied) {
      ++applied;
      EXPECT_LE(r.staleness, 1u);
    } else {
      ++dropped;
      EXPECT_EQ(r.staleness, 2u);
    }
  }
  EXPECT_EQ(applied, 2);
  EXPECT_EQ(dropped, 1);
  EXPECT_EQ((*store)->stats().pushes_dropped_stale, 1u);
  EXPECT_EQ((*store)->version(), 2u);
}

TEST(ParamStoreTest, ShutdownRefusesNewPushes) {
  auto store = ParamStore::Create(Options(2, 4), std::vector<float>(3800, 0));
  ASSERT_TRUE(store.ok());
  (*store)->Shutdown();
  auto g = std::make_shared<const std::vector<float>>((*store)->range().size(),
                                                      1.0f);
  EXPECT_EQ((*store)->Submit(0, 1, g, [](const PushResult&) {}).code(),
            absl::StatusCode::kUnavailable);
}

}  // namespace
}  // namespace asgd
