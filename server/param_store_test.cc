#include "server/param_store.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <random>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "compression/grad_codec.h"
#include "gtest/gtest.h"
#include "server/push_test_cases.h"
#include "step/compressed_apply.h"

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
  // Aborted: the worker pulls again (a restarted server), by the code alone.
  EXPECT_EQ(s.code(), absl::StatusCode::kAborted);
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
  assign.kind = PushRequest::Kind::kAssign;
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


bool AllFinite(const std::vector<float>& v) {
  for (float x : v) {
    if (!std::isfinite(x)) return false;
  }
  return true;
}

// The attack: finite gradients of 3e38 with the largest step a push may ask
// for. Every one is refused whole; the weights never change.
TEST(ParamStoreTest, HugeFiniteGradientsNeverMakeTheModelNonFinite) {
  ParamStoreOptions o = Options(3, 8);
  auto store = ParamStore::Create(o, std::vector<float>(3800, 0.5f));
  ASSERT_TRUE(store.ok());
  ParamStore& ps = **store;
  const std::vector<float> before = ps.Snapshot();
  for (int i = 0; i < 3; ++i) {
    PushResult r = SubmitAndWait(
        ps, Push(ps.accepted(), Filled(ps, 3e38f), 0, o.max_push_minibatches));
    EXPECT_EQ(r.error.code(), absl::StatusCode::kInvalidArgument) << r.error;
    EXPECT_FALSE(r.applied);
  }
  EXPECT_EQ(ps.Snapshot(), before);
  EXPECT_EQ(
      ps.stats().rejected[static_cast<int>(RejectReason::kNonFiniteUpdate)],
      3u);
  // Beyond the step a push may ask for: refused before anything else.
  PushResult r =
      SubmitAndWait(ps, Push(ps.accepted(), Filled(ps, 1), 0, 1 << 20));
  EXPECT_EQ(r.error.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ps.Snapshot(), before);
}

// One element of one shard would overflow: no shard applies the update.
TEST(ParamStoreTest, AnUpdateThatOverflowsOnOneShardIsAppliedOnNone) {
  auto store =
      ParamStore::Create(Options(4, 8), std::vector<float>(3800, 1.0f));
  ASSERT_TRUE(store.ok());
  ParamStore& ps = **store;
  const std::vector<float> before = ps.Snapshot();
  auto g = std::make_shared<std::vector<float>>(ps.range().size(), 1.0f);
  g->back() = 3e38f;  // in the last shard only: 64 * 0.125 * 3e38 is Inf
  PushResult r = SubmitAndWait(ps, Push(0, g, 0, 64));
  EXPECT_EQ(r.error.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ps.Snapshot(), before);
  EXPECT_EQ(ps.stats().updates_checked, 1u);
  // A large step that stays within kMaxMagnitude is applied everywhere,
  // through the same check (its bound is too close to call).
  auto g2 = std::make_shared<std::vector<float>>(ps.range().size(), 1.0f);
  g2->back() = 3e37f;
  r = SubmitAndWait(ps, Push(ps.accepted(), g2, 0, 1));
  ASSERT_TRUE(r.error.ok()) << r.error;
  EXPECT_TRUE(r.applied);
  EXPECT_EQ(ps.stats().updates_checked, 2u);
  const std::vector<float> after = ps.Snapshot();
  EXPECT_EQ(after.front(), 1.0f - 0.125f);
  EXPECT_EQ(after.back(), 1.0f - 0.125f * 3e37f);
  EXPECT_TRUE(AllFinite(after));
}

// Ordinary updates take the fast path: no read-only check at all.
TEST(ParamStoreTest, OrdinaryUpdatesNeedNoCheck) {
  ParamStoreOptions o = Options(2, 64);
  o.optimizer.momentum = 0.9f;
  auto store = ParamStore::Create(o, std::vector<float>(3800, 0.1f));
  ASSERT_TRUE(store.ok());
  ParamStore& ps = **store;
  Completions c;
  for (int i = 0; i < 50; ++i) {
    ASSERT_TRUE(
        ps.Submit(Push(ps.accepted(), Filled(ps, 0.01f * (i % 7)), 0, 4),
                  c.Callback())
            .ok());
  }
  ASSERT_TRUE(c.WaitFor(50));
  EXPECT_EQ(c.applied(), 50);
  EXPECT_EQ(ps.stats().updates_checked, 0u);
}

// Against a plain reference of the same optimizer on the whole range: an
// update is applied (bit for bit) exactly when it keeps every value within
// kMaxMagnitude, whatever mix of magnitudes arrives, with momentum, Nesterov,
// decay and several shards; the model is finite after every update.
TEST(ParamStoreTest, AcceptsExactlyTheUpdatesThatStayFinite) {
  for (bool nesterov : {false, true}) {
    ParamStoreOptions o = Options(3, 8);
    o.optimizer.learning_rate = 0.5f;
    o.optimizer.momentum = 0.5f;
    o.optimizer.nesterov = nesterov;
    o.optimizer.weight_decay = 0.01f;
    auto store = ParamStore::Create(o, std::vector<float>(3800, 0.25f));
    ASSERT_TRUE(store.ok());
    ParamStore& ps = **store;
    auto reference = Optimizer::Create(o.optimizer);
    ASSERT_TRUE(reference.ok());
    std::vector<float> w = ps.Snapshot(), v(w.size(), 0.0f);
    std::mt19937 rng(7);
    // Magnitudes from 1e-3 to past FLT_MAX (then plain values in [-1, 1]);
    // beyond about 1e36 a step leaves kMaxMagnitude.
    std::uniform_real_distribution<float> exponent(-3, 38.5f);
    std::bernoulli_distribution huge(0.5);
    std::uniform_real_distribution<float> unit(-1, 1);
    int applied = 0, refused = 0;
    for (int step = 0; step < 120; ++step) {
      auto g = std::make_shared<std::vector<float>>(w.size());
      const float scale =
          std::pow(10.0f, huge(rng) ? 33 + exponent(rng) / 7 : exponent(rng));
      for (float& x : *g)
        x = std::isfinite(scale) ? unit(rng) * scale : unit(rng);
      const int minibatches = 1 + step % 3;
      UpdateContext ctx;
      ctx.scale = static_cast<float>(minibatches);
      ctx.step = ps.accepted();
      const bool fits =
          reference->StaysBounded(w.data(), v.data(), g->data(), w.size(), ctx);
      if (fits) reference->Apply(w.data(), v.data(), g->data(), w.size(), ctx);
      PushResult r = SubmitAndWait(ps, Push(ps.accepted(), g, 0, minibatches));
      ASSERT_EQ(r.applied, fits) << "step " << step << " scale " << scale;
      ASSERT_EQ(r.error.ok(), fits) << r.error;
      applied += fits;
      refused += !fits;
      const std::vector<float> now = ps.Snapshot();
      ASSERT_TRUE(AllFinite(now)) << "step " << step;
      ASSERT_EQ(now, w) << "step " << step;
    }
    EXPECT_GT(applied, 10);
    EXPECT_GT(refused, 10);
  }
}

TEST(ParamStoreTest, SyncModeRefusesASumThatWouldOverflow) {
  ParamStoreOptions o = Options(2, 8);
  o.sync_workers = 2;
  auto store = ParamStore::Create(o, std::vector<float>(3800, 0.0f));
  ASSERT_TRUE(store.ok());
  ParamStore& ps = **store;
  Completions c;
  ASSERT_TRUE(ps.Submit(Push(0, Filled(ps, 3e38f), 1), c.Callback()).ok());
  const absl::Status s = ps.Submit(Push(0, Filled(ps, 3e38f), 2), c.Callback());
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_TRUE(AllFinite(ps.Snapshot()));
}

TEST(ParamStoreTest, AssignAndRestoreRefuseWhatIsNotFinite) {
  auto store =
      ParamStore::Create(Options(2, 8), std::vector<float>(3800, 0.0f));
  ASSERT_TRUE(store.ok());
  ParamStore& ps = **store;
  PushRequest assign = Push(0, Filled(ps, 3e38f));
  assign.kind = PushRequest::Kind::kAssign;
  PushResult r = SubmitAndWait(ps, std::move(assign));
  EXPECT_EQ(r.error.code(), absl::StatusCode::kInvalidArgument);
  PushRequest nan = Push(0, Filled(ps, std::nanf("")));
  EXPECT_EQ(SubmitAndWait(ps, std::move(nan)).error.code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(AllFinite(ps.Snapshot()));
  auto fresh =
      ParamStore::Create(Options(2, 8), std::vector<float>(3800, 0.0f));
  ASSERT_TRUE(fresh.ok());
  StoreSnapshot bad;
  bad.version = 5;
  bad.weights.assign((*fresh)->range().size(), 1.0f);
  bad.weights[3] = -std::numeric_limits<float>::infinity();
  EXPECT_EQ((*fresh)->Restore(bad).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ((*fresh)->version(), 0u);
}

// 40 workers pull with room for 4 model copies: at most 4 are kept, the
// memory stays within the budget, the copies of the workers that pulled
// last are the ones kept, and a push whose copy was dropped is applied
// without compensation (and counted).
TEST(ParamStoreTest, DelayCompensationCopiesStayWithinTheirBudget) {
  ParamStoreOptions o = Options(2, 8);
  o.optimizer.learning_rate = 0.5f;
  o.optimizer.dc_lambda = 1.0f;
  auto probe = ParamStore::Create(o, std::vector<float>(3800, 0.0f));
  ASSERT_TRUE(probe.ok());
  const int64_t copy_bytes = (*probe)->range().size() * sizeof(float);
  o.dc_memory_bytes = 4 * copy_bytes;
  auto store = ParamStore::Create(o, std::vector<float>(3800, 0.0f));
  ASSERT_TRUE(store.ok());
  ParamStore& ps = **store;
  for (uint64_t worker = 0; worker < 40; ++worker) {
    ASSERT_NE(ps.SnapshotForPull(worker), nullptr);  // each read then dropped
    EXPECT_LE(ps.stats().dc_backups, 4);
    EXPECT_LE(ps.stats().dc_backup_bytes, o.dc_memory_bytes);
  }
  EXPECT_EQ(ps.stats().dc_backups, 4);
  // Pulls still in flight hold their copies: no room for a fifth.
  std::vector<std::shared_ptr<const std::vector<float>>> held;
  for (uint64_t worker = 100; worker < 104; ++worker) {
    held.push_back(ps.SnapshotForPull(worker));
    ASSERT_NE(held.back(), nullptr);
  }
  EXPECT_EQ(ps.SnapshotForPull(200), nullptr);  // served live, nothing kept
  EXPECT_LE(ps.stats().dc_backup_bytes, o.dc_memory_bytes);
  held.clear();
  // Worker 0's copy is long gone: plain step (w = 0 - 0.5 * 1).
  PushResult r = SubmitAndWait(ps, Push(0, Filled(ps, 1), /*worker=*/0));
  ASSERT_TRUE(r.applied);
  EXPECT_EQ(ps.stats().dc_backup_misses, 1u);
  for (float x : ps.Snapshot()) ASSERT_EQ(x, -0.5f);
  // Worker 103 pulled at w = 0 and its copy is kept: compensated step,
  // g' = 1 + 1 * 1 * 1 * (-0.5 - 0) = 0.5; w = -0.5 - 0.5 * 0.5 = -0.75.
  r = SubmitAndWait(ps, Push(0, Filled(ps, 1), /*worker=*/103));
  ASSERT_TRUE(r.applied);
  EXPECT_EQ(ps.stats().dc_backup_misses, 1u);
  for (float x : ps.Snapshot()) ASSERT_EQ(x, -0.75f);
}

// A compressed gradient of the store's range: `values` encoded (1-bit with
// rows of `group` elements, or top-k of `fraction`) in chunks of at most
// `chunk` elements, each with its own zero residual.
std::shared_ptr<const CompressedGradient> Compress(
    const std::vector<float>& values, GradEncoding encoding, int64_t chunk,
    int64_t group = 37, double fraction = 0.1) {
  auto bytes = std::make_shared<std::vector<std::string>>();
  const int64_t n = values.size();
  for (int64_t at = 0; at < n; at += chunk) {
    const int64_t count = std::min(chunk, n - at);
    std::vector<float> residual(count, 0.0f);
    const absl::Span<const float> g(values.data() + at, count);
    std::string out;
    const absl::Status s =
        encoding == GradEncoding::kOneBit
            ? EncodeOneBit(g, group, std::min(group, count),
                           absl::MakeSpan(residual), &out)
            : EncodeTopK(g, TopKCount(fraction, count),
                         absl::MakeSpan(residual), &out);
    EXPECT_TRUE(s.ok()) << s;
    bytes->push_back(std::move(out));
  }
  auto gradient = std::make_shared<CompressedGradient>();
  gradient->encoding = encoding;
  for (const std::string& b : *bytes) {
    gradient->chunks.push_back(*ParseCompressedChunk(b, {}));
    gradient->max_abs =
        std::max(gradient->max_abs, CompressedMaxAbs(gradient->chunks.back()));
  }
  gradient->storage = bytes;
  return gradient;
}

std::shared_ptr<const std::vector<float>> Decoded(const CompressedGradient& g) {
  auto out = std::make_shared<std::vector<float>>(g.size());
  DecodeCompressedRange(g.chunks, out->data());
  return out;
}

PushRequest CompressedPush(uint64_t base,
                           std::shared_ptr<const CompressedGradient> g,
                           uint64_t worker = 0, int minibatches = 1) {
  PushRequest r;
  r.worker_id = worker;
  r.base_version = base;
  r.num_minibatches = minibatches;
  r.compressed = std::move(g);
  return r;
}

// A compressed push moves the model exactly as its decoded float32 form
// does, for 1-bit and top-k, plain SGD and momentum, across shards whose
// boundaries cut chunks and rows.
TEST(ParamStoreTest, CompressedPushesApplyExactlyTheirDecodedGradient) {
  std::mt19937 rng(5);
  std::normal_distribution<float> dist;
  for (float momentum : {0.0f, 0.9f}) {
    for (GradEncoding encoding : {GradEncoding::kOneBit, GradEncoding::kTopK}) {
      ParamStoreOptions o = Options(3, 8);
      o.optimizer.momentum = momentum;
      std::vector<float> initial(3800);
      for (float& x : initial) x = dist(rng);
      auto a = ParamStore::Create(o, initial);
      auto b = ParamStore::Create(o, initial);
      ASSERT_TRUE(a.ok() && b.ok());
      for (int step = 0; step < 4; ++step) {
        std::vector<float> g((*a)->range().size());
        for (float& x : g) x = dist(rng);
        auto compressed = Compress(g, encoding, /*chunk=*/500);
        PushResult ra = SubmitAndWait(**a, CompressedPush(step, compressed));
        PushResult rb =
            SubmitAndWait(**b, Push(step, Decoded(*compressed), 0, 1));
        ASSERT_TRUE(ra.applied && rb.applied) << ra.error << rb.error;
      }
      EXPECT_EQ((*a)->Snapshot(), (*b)->Snapshot())
          << GradEncodingName(encoding) << " momentum " << momentum;
    }
  }
}

// The bound of a compressed push is its largest reconstruction value: a
// 1-bit push whose levels would overflow one shard's weights is refused on
// every shard, and the model does not change.
TEST(ParamStoreTest, CompressedPushesKeepTheModelFiniteAllOrNone) {
  auto store = ParamStore::Create(Options(4, 8), std::vector<float>(3800, 1.0f));
  ASSERT_TRUE(store.ok());
  ParamStore& ps = **store;
  const std::vector<float> before = ps.Snapshot();
  std::vector<float> g(ps.range().size(), 1.0f);
  g.back() = 3e38f;  // in the last shard's last row only
  auto compressed = Compress(g, GradEncoding::kOneBit, 500);
  EXPECT_GE(compressed->max_abs, 3e38f / 37);
  PushResult r = SubmitAndWait(ps, CompressedPush(0, compressed, 0, 64));
  EXPECT_EQ(r.error.code(), absl::StatusCode::kInvalidArgument) << r.error;
  EXPECT_EQ(ps.Snapshot(), before);
  EXPECT_EQ(
      ps.stats().rejected[static_cast<int>(RejectReason::kNonFiniteUpdate)],
      1u);
  // An ordinary compressed push needs no check and is applied.
  r = SubmitAndWait(ps, CompressedPush(ps.accepted(),
                                       Compress(std::vector<float>(
                                                    ps.range().size(), 0.5f),
                                                GradEncoding::kTopK, 500)));
  EXPECT_TRUE(r.applied) << r.error;
  EXPECT_TRUE(AllFinite(ps.Snapshot()));
  EXPECT_NE(ps.Snapshot(), before);
}

TEST(ParamStoreTest, CompressedAssignsAndWrongSizesAreRefused) {
  auto store = ParamStore::Create(Options(2, 8), std::vector<float>(3800, 1.0f));
  ASSERT_TRUE(store.ok());
  ParamStore& ps = **store;
  const std::vector<float> before = ps.Snapshot();
  PushRequest assign = CompressedPush(
      0, Compress(std::vector<float>(ps.range().size(), 0.5f),
                  GradEncoding::kOneBit, 500));
  assign.kind = PushRequest::Kind::kAssign;
  EXPECT_EQ(SubmitAndWait(ps, std::move(assign)).error.code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(SubmitAndWait(ps, CompressedPush(0, Compress(std::vector<float>(
                                                              100, 0.5f),
                                                          GradEncoding::kOneBit,
                                                          500)))
                .error.code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ps.Snapshot(), before);
  EXPECT_EQ(ps.accepted(), 0u);
}

// Synchronous steps sum float32 gradients: a compressed push is decoded into
// staging memory and averaged like a float push.
TEST(ParamStoreTest, SyncModeAveragesCompressedPushesAsDecoded) {
  ParamStoreOptions o = Options(2, 8);
  o.sync_workers = 2;
  auto a = ParamStore::Create(o, std::vector<float>(3800, 1.0f));
  auto b = ParamStore::Create(o, std::vector<float>(3800, 1.0f));
  ASSERT_TRUE(a.ok() && b.ok());
  std::mt19937 rng(9);
  std::normal_distribution<float> dist;
  std::vector<float> g((*a)->range().size());
  for (float& x : g) x = dist(rng);
  auto compressed = Compress(g, GradEncoding::kOneBit, 700);
  Completions ca, cb;
  ASSERT_TRUE((*a)->Submit(CompressedPush(0, compressed, 0), ca.Callback()).ok());
  ASSERT_TRUE((*a)->Submit(Push(0, Filled(**a, 0.25f), 1), ca.Callback()).ok());
  ASSERT_TRUE((*b)->Submit(Push(0, Decoded(*compressed), 0), cb.Callback()).ok());
  ASSERT_TRUE((*b)->Submit(Push(0, Filled(**b, 0.25f), 1), cb.Callback()).ok());
  ASSERT_TRUE(ca.WaitFor(2) && cb.WaitFor(2));
  EXPECT_EQ(ca.applied(), 2);
  EXPECT_EQ((*a)->Snapshot(), (*b)->Snapshot());
}

}  // namespace
}  // namespace asgd

namespace asgd {
namespace {

// Max-change: an update whose gradient term would move a weight by more
// than max_change is scaled down to exactly that, keeping its direction;
// honest updates are applied as they are; the learning rate a delta pull
// replays (the update log) is the clipped one.
TEST(ParamStoreTest, MaxChangeScalesHugeUpdatesDownAndLeavesOthersAlone) {
  ParamStoreOptions o = Options(3, 8);
  o.max_change = 0.5;
  o.minibatch_lr_scale = MinibatchLrScale::kLinear;
  auto store = ParamStore::Create(o, std::vector<float>(3800, 0.0f));
  ASSERT_TRUE(store.ok()) << store.status();
  ParamStore& ps = **store;
  const int64_t n = ps.range().size();
  // Honest: 0.125 * 2 = 0.25 <= 0.5, applied as is.
  auto g = std::make_shared<std::vector<float>>(n);
  for (int64_t i = 0; i < n; ++i) g->at(i) = (i % 2 ? 2.0f : -1.0f);
  ASSERT_TRUE(SubmitAndWait(ps, Push(0, g)).applied);
  std::vector<float> before = ps.Snapshot();
  for (int64_t i = 0; i < n; ++i) {
    ASSERT_EQ(before[i], -0.125f * g->at(i)) << i;
  }
  EXPECT_EQ(ps.stats().updates_clipped, 0u);
  // Garbage: finite values of -1e35, 64 minibatches (linear scale: x64).
  auto huge = std::make_shared<std::vector<float>>(n);
  for (int64_t i = 0; i < n; ++i) huge->at(i) = (i % 3 ? -1e35f : -5e34f);
  ASSERT_TRUE(SubmitAndWait(ps, Push(1, huge, 0, 64)).applied);
  std::vector<float> after = ps.Snapshot();
  double largest = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double change = std::fabs(double(after[i]) - before[i]);
    largest = std::max(largest, change);
    ASSERT_LE(change, 0.5 * (1 + 1e-6)) << i;
    // Its direction kept: half the gradient, half the step.
    const double want = (i % 3 ? 0.5 : 0.25);
    ASSERT_NEAR(change, want, 1e-6) << i;
  }
  EXPECT_NEAR(largest, 0.5, 1e-6);
  EXPECT_EQ(ps.stats().updates_clipped, 1u);
  EXPECT_NEAR(ps.stats().largest_change, 0.125 * 64 * 1e35, 1e30);
}

TEST(ParamStoreTest, MaxChangeBoundsCompressedPushesAndTheReplayedRate) {
  ParamStoreOptions o = Options(2, 8);
  o.max_change = 0.25;
  auto store = ParamStore::Create(o, std::vector<float>(3800, 0.0f));
  ASSERT_TRUE(store.ok()) << store.status();
  ParamStore& ps = **store;
  ASSERT_NE(ps.update_log(), nullptr);
  const int64_t n = ps.range().size();
  std::vector<float> values(n, 0.0f);
  for (int64_t i = 0; i < n; i += 7) values[i] = -1e35f;
  // Top-k chunks of 500 in one buffer, as a push assembler leaves them
  // (what the update log keeps).
  std::shared_ptr<const CompressedGradient> compressed =
      TopKGradient(values, 500, 0.2);
  ASSERT_NE(compressed, nullptr);
  for (int k = 0; k < 3; ++k) {
    ASSERT_TRUE(
        SubmitAndWait(ps, CompressedPush(k, compressed, 0, 64)).applied);
  }
  const std::vector<float> w = ps.Snapshot();
  float largest = 0;
  for (float x : w) largest = std::max(largest, std::fabs(x));
  // Three updates, each within 0.25.
  EXPECT_LE(largest, 3 * 0.25 * (1 + 1e-6));
  EXPECT_GT(largest, 0.7);
  EXPECT_EQ(ps.stats().updates_clipped, 3u);
  // The log holds the rate the shards applied (what a replay uses).
  EXPECT_EQ(ps.update_log()->last_unreplayable(), 0u);
  EXPECT_EQ(ps.update_log()->size(), 3u);
  const auto logged = ps.update_log()->Collect(0, 3, int64_t{1} << 30);
  ASSERT_TRUE(logged.has_value());
  ASSERT_EQ(logged->size(), 3u);
  for (const auto& u : *logged) {
    EXPECT_NEAR(u->learning_rate * 1e35, 0.25, 1e-6);
  }
}

// A pruned model (ParamStoreOptions::keep): float32, 1-bit, top-k and assign
// pushes, with momentum and weight decay, leave every pruned weight exactly
// 0 and move the others; no update log is kept (no delta pulls); a snapshot
// restored into a new store under the same mask keeps them at 0.
TEST(ParamStoreTest, PrunedWeightsStayZeroUnderEveryPush) {
  std::mt19937 rng(9);
  std::normal_distribution<float> dist;
  ParamStoreOptions o = Options(3, 8);
  o.optimizer.momentum = 0.9f;
  o.optimizer.weight_decay = 0.01f;
  std::vector<float> initial(3800);
  auto keep = std::make_shared<std::vector<uint8_t>>(3800);
  for (int64_t i = 0; i < 3800; ++i) {
    (*keep)[i] = rng() % 10 < 3;
    initial[i] = (*keep)[i] ? dist(rng) : 0.0f;
  }
  o.keep = keep;
  auto store = ParamStore::Create(o, initial);
  ASSERT_TRUE(store.ok()) << store.status();
  ParamStore& ps = **store;
  EXPECT_EQ(ps.update_log(), nullptr);
  const FlatRange r = ps.range();
  auto expect_pruned_zero = [&](const std::vector<float>& w) {
    int64_t moved = 0;
    for (int64_t i = 0; i < r.size(); ++i) {
      if ((*keep)[r.begin + i] == 0) {
        ASSERT_EQ(w[i], 0.0f) << i;
      } else {
        moved += w[i] != initial[r.begin + i];
      }
    }
    EXPECT_GT(moved, r.size() / 5);
  };
  uint64_t version = 0;
  for (int round = 0; round < 2; ++round) {
    std::vector<float> g(r.size());
    for (float& x : g) x = dist(rng);
    ASSERT_TRUE(SubmitAndWait(ps, Push(version++, std::make_shared<const
                                       std::vector<float>>(g))).applied);
    for (GradEncoding e : {GradEncoding::kOneBit, GradEncoding::kTopK}) {
      ASSERT_TRUE(
          SubmitAndWait(ps, CompressedPush(version++, Compress(g, e, 500, 37,
                                                               0.5)))
              .applied);
    }
    expect_pruned_zero(ps.Snapshot());
  }
  PushRequest assign = Push(version++, Filled(ps, 3.0f));
  assign.kind = PushRequest::Kind::kAssign;
  ASSERT_TRUE(SubmitAndWait(ps, std::move(assign)).applied);
  std::vector<float> w = ps.Snapshot();
  for (int64_t i = 0; i < r.size(); ++i) {
    ASSERT_EQ(w[i], (*keep)[r.begin + i] ? 3.0f : 0.0f) << i;
  }

  // A restart from the snapshot, under the same mask.
  absl::StatusOr<StoreSnapshot> snapshot = ps.TakeSnapshot();
  ASSERT_TRUE(snapshot.ok()) << snapshot.status();
  auto restarted = ParamStore::Create(o, initial);
  ASSERT_TRUE(restarted.ok());
  ASSERT_TRUE((*restarted)->Restore(*snapshot).ok());
  std::vector<float> g(r.size(), 1.0f);
  ASSERT_TRUE(SubmitAndWait(**restarted,
                            Push(snapshot->version,
                                 std::make_shared<const std::vector<float>>(g)))
                  .applied);
  w = (*restarted)->Snapshot();
  for (int64_t i = 0; i < r.size(); ++i) {
    if ((*keep)[r.begin + i] == 0) {
      ASSERT_EQ(w[i], 0.0f) << i;
    }
  }

  o.keep = std::make_shared<std::vector<uint8_t>>(100);  // not the model's
  EXPECT_EQ(ParamStore::Create(o, initial).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace asgd
