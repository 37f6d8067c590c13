#include "server/param_store.h"

#include <atomic>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"

namespace asgd {
namespace {

PushRequest Push(uint64_t base, std::shared_ptr<const std::vector<float>> g,
                 uint64_t worker = 0, int minibatches = 1) {
  PushRequest r;
  r.worker_id = worker;
  r.base_version = base;
  r.num_minibatches = minibatches;
  r.values = std::move(g);
  return r;
}

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
        ASSERT_TRUE(ps.Submit(Push(ps.version(), ones), completions.Callback())
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
      (*store)->Submit(Push(5, g), [&](const PushResult&) { called = true; });
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
  EXPECT_EQ((*store)->Submit(Push(0, g), [](const PushResult&) {}).code(),
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
  for (int i = 0; i < 3; ++i) ASSERT_TRUE((*store)->Submit(Push(0, g), record).ok());
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
  EXPECT_EQ((*store)->Submit(Push(0, g), [](const PushResult&) {}).code(),
            absl::StatusCode::kUnavailable);
}

std::shared_ptr<const std::vector<float>> Filled(const ParamStore& ps, float v) {
  return std::make_shared<const std::vector<float>>(ps.range().size(), v);
}

TEST(ParamStoreTest, SyncModeAppliesExactlyOneAveragedUpdatePerVersion) {
  ParamStoreOptions o = Options(2, 8);
  o.sync_workers = 3;
  auto store = ParamStore::Create(o, std::vector<float>(3800, 0.0f));
  ASSERT_TRUE(store.ok());
  ParamStore& ps = **store;
  Completions completions;
  // Three workers push 1, 2 and 6 for version 0: one update with mean 3.
  ASSERT_TRUE(ps.Submit(Push(0, Filled(ps, 1), 0), completions.Callback()).ok());
  ASSERT_TRUE(ps.Submit(Push(0, Filled(ps, 2), 1), completions.Callback()).ok());
  EXPECT_EQ(ps.accepted(), 0u);  // still waiting for the third worker
  // The same worker twice for one step is an error.
  EXPECT_EQ(ps.Submit(Push(0, Filled(ps, 9), 1), completions.Callback()).code(),
            absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(ps.Submit(Push(0, Filled(ps, 6), 2), completions.Callback()).ok());
  ASSERT_TRUE(completions.WaitFor(3));
  EXPECT_EQ(completions.applied(), 3);
  EXPECT_EQ(ps.version(), 1u);
  EXPECT_EQ(ps.stats().pushes_applied, 1u);
  for (float x : ps.Snapshot()) ASSERT_EQ(x, -0.125f * 3);
  // A push computed from version 0 is now one step late: dropped.
  PushResult late;
  ASSERT_TRUE(ps.Submit(Push(0, Filled(ps, 1), 0),
                        [&](const PushResult& r) { late = r; }).ok());
  EXPECT_FALSE(late.applied);
  EXPECT_EQ(ps.version(), 1u);
}

TEST(ParamStoreTest, AssignReplacesTheWeightsAndAdvancesTheVersion) {
  ParamStoreOptions o = Options(3, 4);
  o.optimizer.momentum = 0.5f;
  auto store = ParamStore::Create(o, std::vector<float>(3800, 1.0f));
  ASSERT_TRUE(store.ok());
  ParamStore& ps = **store;
  Completions c;
  ASSERT_TRUE(ps.Submit(Push(0, Filled(ps, 1)), c.Callback()).ok());
  PushRequest assign = Push(1, Filled(ps, 7));
  assign.assign = true;
  ASSERT_TRUE(ps.Submit(std::move(assign), c.Callback()).ok());
  ASSERT_TRUE(c.WaitFor(2));
  for (float x : ps.Snapshot()) ASSERT_EQ(x, 7.0f);
  EXPECT_EQ(ps.version(), 2u);
  // Momentum was reset: the next step is a plain lr * g.
  ASSERT_TRUE(ps.Submit(Push(2, Filled(ps, 1)), c.Callback()).ok());
  ASSERT_TRUE(c.WaitFor(3));
  for (float x : ps.Snapshot()) ASSERT_EQ(x, 7.0f - 0.125f);
}

TEST(ParamStoreTest, LearningRateScalesWithMinibatchesAndStaleness) {
  ParamStoreOptions o = Options(1, 8);
  o.minibatch_lr_scale = MinibatchLrScale::kLinear;
  o.staleness_lr_scale = StalenessLrScale::kInverse;
  auto store = ParamStore::Create(o, std::vector<float>(3800, 0.0f));
  ASSERT_TRUE(store.ok());
  ParamStore& ps = **store;
  Completions c;
  // 4 accumulated minibatches at staleness 0: step 4 * lr.
  ASSERT_TRUE(ps.Submit(Push(0, Filled(ps, 1), 0, 4), c.Callback()).ok());
  ASSERT_TRUE(c.WaitFor(1));
  EXPECT_EQ(ps.Snapshot()[0], -0.5f);
  // 1 minibatch at staleness 1: step lr / 2.
  ASSERT_TRUE(ps.Submit(Push(0, Filled(ps, 1)), c.Callback()).ok());
  ASSERT_TRUE(c.WaitFor(2));
  EXPECT_EQ(ps.Snapshot()[0], -0.5f - 0.0625f);
}

TEST(ParamStoreTest, DelayCompensationUsesTheWorkersPulledModel) {
  ParamStoreOptions o = Options(2, 8);
  o.optimizer.learning_rate = 0.5f;
  o.optimizer.dc_lambda = 1.0f;
  auto store = ParamStore::Create(o, std::vector<float>(3800, 0.0f));
  ASSERT_TRUE(store.ok());
  ParamStore& ps = **store;
  Completions c;
  auto backup = ps.SnapshotForPull(/*worker_id=*/5);  // worker 5 sees w = 0
  ASSERT_NE(backup, nullptr);
  // Worker 6 moves the model to w = -0.5 (its backup is unknown: plain step).
  ASSERT_TRUE(ps.Submit(Push(0, Filled(ps, 1), 6), c.Callback()).ok());
  ASSERT_TRUE(c.WaitFor(1));
  // Worker 5's gradient 1, computed at w = 0, applied at w = -0.5:
  // g' = 1 + 1 * 1 * 1 * (-0.5 - 0) = 0.5; w = -0.5 - 0.5 * 0.5 = -0.75.
  ASSERT_TRUE(ps.Submit(Push(0, Filled(ps, 1), 5), c.Callback()).ok());
  ASSERT_TRUE(c.WaitFor(2));
  for (float x : ps.Snapshot()) ASSERT_EQ(x, -0.75f);
}

}  // namespace
}  // namespace asgd
