// The worker-side controls a user would notice, each checked on what reaches
// an in-memory pool. Time is a seam: back-off waits and straggler idling go
// through a test clock, and a slow network is a push the test holds back
// until the worker has computed a given number of minibatches, so nothing
// depends on one thread being faster than another. (The same controls over
// real gRPC servers: tests/trainer_pool_test.cc.)
#include "worker/ps/trainer.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <future>
#include <random>
#include <sstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/refusal.h"
#include "gtest/gtest.h"
#include "model/cpu_backend.h"
#include "model/staging_spy.h"
#include "worker/data/make_examples.h"
#include "worker/data/stream_source.h"
#include "worker/data/toy_task.h"
#include "worker/data/utterances.h"
#include "worker/loop/fake_clock.h"

namespace asgd {
namespace {

ModelSpec SmallSpec() { return ToyModel("dnn"); }

// A one-server pool in memory: plain SGD, records every call. With
// hold_pushes_, a push does not return before release_pushes_ says so.
class FakePool : public ParamClient {
 public:
  explicit FakePool(const ModelSpec& spec = SmallSpec(), float lr = 0.1f)
      : layout_(*ModelLayout::Create(ModelTensors(spec), 1, 1)),
        spec_(spec),
        model_(InitialParams(spec, 1)),
        lr_(lr) {
    attributes_["learning_rate"] = "0.1";
  }
  const ModelLayout& layout() const override { return layout_; }
  const ModelSpec& model() const override { return spec_; }
  int max_push_minibatches() const override { return max_push_minibatches_; }
  const std::map<std::string, std::string>& attributes() const override {
    return attributes_;
  }
  using ParamClient::Pull;
  absl::Status Pull(PullSink* sink, std::vector<uint64_t>* versions) override {
    const absl::Span<float> params = sink->Staging({0, sink->size()});
    absl::MutexLock lock(&mu_);
    const int64_t me = pulls_started_++;
    if (hold_pulls_from_ >= 0 && me >= hold_pulls_from_) {
      // Held until released, or given up on after a while (a trainer that
      // waits for it would otherwise never get there): counted.
      auto released = [this, me]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return pulls_released_ > me || !hold_pulls_;
      };
      if (!mu_.AwaitWithTimeout(absl::Condition(&released),
                                pull_hold_at_most_)) {
        ++pulls_given_up_;
      }
    }
    if (fail_pulls_ > 0) {
      --fail_pulls_;
      log_.push_back("pull-failed");
      return absl::UnavailableError("server restarting");
    }
    std::copy(model_.begin(), model_.end(), params.begin());
    *versions = {version_};
    log_.push_back("pull");
    pull_versions_.push_back(version_);
    return sink->Commit({0, sink->size()});
  }
  // The trainer pushes host gradients (Push); encoded pushes are not used.
  std::vector<absl::StatusOr<ServerPushReply>> PushEncoded(
      const std::vector<ServerPush>& parts, const std::vector<uint64_t>&,
      int) override {
    return std::vector<absl::StatusOr<ServerPushReply>>(
        parts.size(), absl::UnimplementedError("not used by the trainer"));
  }
  absl::StatusOr<PushOutcome> Push(absl::Span<const float> g,
                                   const std::vector<uint64_t>& versions,
                                   int n, PushKind kind) override {
    absl::MutexLock lock(&mu_);
    PushOutcome out;
    if (kind == PushKind::kAssign) {
      model_.assign(g.begin(), g.end());
      assigned_ = model_;
      ++version_;
      log_.push_back("assign");
      out.applied = 1;
      return out;
    }
    std::pair<FakePool*, int64_t> me(this, started_++);
    const absl::Condition released(
        +[](std::pair<FakePool*, int64_t>* a) ABSL_EXCLUSIVE_LOCKS_REQUIRED(
             a->first->mu_) {
          return !a->first->hold_pushes_ || a->first->released_ > a->second;
        },
        &me);
    if (hold_at_most_ > absl::ZeroDuration()) {
      // Released, or given up on after a while: a worker that waits for
      // this push (it may not compute more) is not kept waiting forever.
      mu_.AwaitWithTimeout(released, hold_at_most_);
    } else {
      mu_.Await(released);
    }
    ++completed_;
    if (fail_pushes_ > 0) {
      --fail_pushes_;
      log_.push_back("push-failed");
      return absl::UnavailableError("connection reset");
    }
    if (!push_errors_.empty()) {
      const absl::Status error = push_errors_.front();
      push_errors_.erase(push_errors_.begin());
      log_.push_back("push-failed");
      return error;
    }
    log_.push_back("push");
    push_bases_.push_back(versions[0]);
    minibatches_pushed_ += n;
    max_minibatches_ = std::max(max_minibatches_, n);
    ++pushes_;
    if (drop_every_ > 0 && pushes_ % drop_every_ == 0) {
      out.dropped = 1;
      out.pull_required = true;
      drops_at_version_.push_back({pushes_, version_});
      return out;
    }
    for (size_t i = 0; i < model_.size(); ++i) model_[i] -= lr_ * n * g[i];
    ++version_;
    out.applied = 1;
    out.max_staleness = version_ - 1 - versions[0];
    return out;
  }
  absl::StatusOr<std::vector<uint64_t>> Versions() override {
    absl::MutexLock lock(&mu_);
    return std::vector<uint64_t>{version_};
  }
  // One dataset: the ids in order, whatever the run id (recorded).
  absl::StatusOr<PoolGrant> FetchBatches(const std::string& run_id,
                                         uint64_t num_frames, int batch_size,
                                         double epochs, int count) override {
    absl::MutexLock lock(&mu_);
    fetch_run_ids_.push_back(run_id);
    if (!fetch_errors_.empty()) {
      const absl::Status error = fetch_errors_.front();
      fetch_errors_.erase(fetch_errors_.begin());
      log_.push_back("fetch-failed");
      return error;
    }
    if (!fetch_always_.ok()) return fetch_always_;
    PoolGrant grant;
    grant.batches_per_epoch = num_frames / batch_size;
    const auto total = static_cast<uint64_t>(
        std::ceil(epochs * static_cast<double>(grant.batches_per_epoch)));
    while (static_cast<int>(grant.batch_ids.size()) < count &&
           fetch_next_ < total) {
      grant.batch_ids.push_back(fetch_next_++);
    }
    grant.exhausted = fetch_next_ >= total;
    log_.push_back("fetch");
    return grant;
  }

  // Lets push number `index` (0-based) and all before it complete.
  void Release(int64_t index) {
    absl::MutexLock lock(&mu_);
    released_ = std::max(released_, index + 1);
  }
  // Stops holding pushes back.
  void ReleaseAll() {
    absl::MutexLock lock(&mu_);
    hold_pushes_ = false;
  }
  // Lets pull number `index` (0-based) and all before it complete.
  void ReleasePull(int64_t index) {
    absl::MutexLock lock(&mu_);
    pulls_released_ = std::max(pulls_released_, index + 1);
  }
  void ReleaseAllPulls() {
    absl::MutexLock lock(&mu_);
    hold_pulls_ = false;
  }
  // Blocks until pull number `index` has started (completed).
  void AwaitPullStarted(int64_t index) {
    absl::MutexLock lock(&mu_);
    auto started = [this, index]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return pulls_started_ > index;
    };
    mu_.Await(absl::Condition(&started));
  }
  int64_t pulls_started() {
    absl::MutexLock lock(&mu_);
    return pulls_started_;
  }
  void AwaitPullDone(int64_t index) {
    absl::MutexLock lock(&mu_);
    auto done = [this, index]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return static_cast<int64_t>(pull_versions_.size()) > index;
    };
    mu_.Await(absl::Condition(&done));
  }
  // Blocks until every push started so far has completed.
  void AwaitPushesDone() {
    absl::MutexLock lock(&mu_);
    mu_.Await(absl::Condition(
        +[](FakePool* p) ABSL_EXCLUSIVE_LOCKS_REQUIRED(p->mu_) {
          return p->completed_ == p->started_;
        },
        this));
  }

  absl::Mutex mu_;
  ModelLayout layout_;
  const ModelSpec spec_;
  std::map<std::string, std::string> attributes_;
  std::vector<float> model_ ABSL_GUARDED_BY(mu_);
  std::vector<float> assigned_ ABSL_GUARDED_BY(mu_);
  uint64_t version_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<std::string> log_ ABSL_GUARDED_BY(mu_);
  int64_t pushes_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t minibatches_pushed_ ABSL_GUARDED_BY(mu_) = 0;
  int max_minibatches_ ABSL_GUARDED_BY(mu_) = 0;
  int drop_every_ = 0;
  int fail_pulls_ ABSL_GUARDED_BY(mu_) = 0;
  int fail_pushes_ ABSL_GUARDED_BY(mu_) = 0;
  // Errors the next pushes get, in order.
  std::vector<absl::Status> push_errors_ ABSL_GUARDED_BY(mu_);
  // The pool: errors the next fetches get, in order; then fetch_always_
  // (when not OK) or the next ids.
  std::vector<absl::Status> fetch_errors_ ABSL_GUARDED_BY(mu_);
  absl::Status fetch_always_ ABSL_GUARDED_BY(mu_);
  uint64_t fetch_next_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<std::string> fetch_run_ids_ ABSL_GUARDED_BY(mu_);
  int max_push_minibatches_ = 0;
  bool hold_pushes_ ABSL_GUARDED_BY(mu_) = false;
  absl::Duration hold_at_most_;  // 0: until released
  int64_t started_ ABSL_GUARDED_BY(mu_) = 0;
  // Pulls from number hold_pulls_from_ on (-1: none) wait for ReleasePull.
  int64_t hold_pulls_from_ = -1;
  absl::Duration pull_hold_at_most_ = absl::Seconds(20);
  bool hold_pulls_ ABSL_GUARDED_BY(mu_) = true;
  int64_t pulls_started_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t pulls_released_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t pulls_given_up_ ABSL_GUARDED_BY(mu_) = 0;
  // The version each pull served; each applied push's base version; and
  // (push number, version) at each stale drop.
  std::vector<uint64_t> pull_versions_ ABSL_GUARDED_BY(mu_);
  std::vector<uint64_t> push_bases_ ABSL_GUARDED_BY(mu_);
  std::vector<std::pair<int64_t, uint64_t>> drops_at_version_
      ABSL_GUARDED_BY(mu_);
  int64_t completed_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t released_ ABSL_GUARDED_BY(mu_) = 0;
  float lr_;
};

TrainerOptions BaseOptions(FakeClock* clock) {
  TrainerOptions o;
  o.loop.batch_size = 16;
  o.loop.epochs = 0;
  o.loop.max_steps = 40;
  o.loop.log_every = 0;
  o.loop.clock = clock;
  return o;
}

// Trains the pool's model on part `part` of `parts` of the toy task.
absl::StatusOr<TrainResult> Train(ParamClient* client, const TrainerOptions& o,
                                  int part = 0, int parts = 1,
                                  std::ostream* log = nullptr) {
  const Utterances train_utts = ToyUtterances(1, part, parts);
  const Utterances heldout_utts = ToyUtterances(1);
  const ModelSpec& spec = client->model();
  auto train = MakeExamples(spec, &train_utts, ToyDataOptions());
  if (!train.ok()) return train.status();
  auto heldout = MakeExamples(spec, &heldout_utts, ToyDataOptions());
  if (!heldout.ok()) return heldout.status();
  auto backend =
      CreateCpuBackend(spec, ShapeOfBatch(**train, o.loop.batch_size).rows());
  if (!backend.ok()) return backend.status();
  Trainer trainer(client, backend->get(), train->get(), heldout->get(), o, log);
  return trainer.Run();
}

int64_t Count(const std::vector<std::string>& log, const std::string& op) {
  return std::count(log.begin(), log.end(), op);
}

TEST(TrainerTest, PushEveryKSendsOneKthAsManyPushes) {
  for (int k : {1, 4}) {
    FakeClock clock;
    FakePool pool;
    TrainerOptions o = BaseOptions(&clock);
    o.push_every = k;
    auto result = Train(&pool, o);
    ASSERT_TRUE(result.ok()) << result.status();
    EXPECT_EQ(result->steps, 40);
    EXPECT_EQ(result->frames, 40 * 16);  // labelled frames
    EXPECT_EQ(result->pushes, 40 / k) << "k=" << k;
    absl::MutexLock lock(&pool.mu_);
    EXPECT_EQ(pool.pushes_, 40 / k);
    EXPECT_EQ(pool.minibatches_pushed_, 40);  // every gradient reached it
  }
}

TEST(TrainerTest, DroppedPushIsFollowedByAFreshPull) {
  FakeClock clock;
  FakePool pool;
  pool.drop_every_ = 3;
  auto result = Train(&pool, BaseOptions(&clock));
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->pushes_dropped, 40 / 3);
  absl::MutexLock lock(&pool.mu_);
  // Between two pushes there is always a pull.
  std::string last;
  for (const std::string& op : pool.log_) {
    if (op == "push") {
      EXPECT_NE(last, "push");
    }
    last = op;
  }
}

// Releases push k once the worker has computed steps_per_push minibatches
// past its start, and every push after the last step: the network is slower than
// compute by construction.
class SlowNetwork : public TrainerObserver {
 public:
  SlowNetwork(FakePool* pool, int64_t max_steps, int steps_per_push = 3)
      : pool_(pool), max_steps_(max_steps), steps_per_push_(steps_per_push) {}
  void OnStep(const StepReport&) override {
    if (++steps_ % steps_per_push_ == 0) pool_->Release(released_++);
    if (steps_ == max_steps_) pool_->ReleaseAll();
  }
  void OnPush(const PushReport&) override {}
  void OnHeldoutAccuracy(double) override {}

 private:
  FakePool* const pool_;
  const int64_t max_steps_;
  const int steps_per_push_;
  int64_t steps_ = 0;
  int64_t released_ = 0;
};

TEST(TrainerTest, ComputesMoreMinibatchesWhileAPushIsOnTheWire) {
  FakeClock clock;
  FakePool pool;
  {
    absl::MutexLock lock(&pool.mu_);
    pool.hold_pushes_ = true;
  }
  SlowNetwork network(&pool, 60);
  TrainerOptions o = BaseOptions(&clock);
  o.compute_while_pushing = true;
  o.loop.max_steps = 60;
  o.loop.observer = &network;
  auto result = Train(&pool, o);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->steps, 60);
  absl::MutexLock lock(&pool.mu_);
  EXPECT_LE(pool.pushes_, 60 / 3 + 1);  // minibatches went out together
  EXPECT_GE(pool.max_minibatches_, 3);
  EXPECT_LE(pool.max_minibatches_, 4);  // but never more than 4 in one push
  EXPECT_EQ(pool.minibatches_pushed_, 60);  // and none was lost
  // The model is still refreshed after every completed push: a pull follows
  // each one (one pull may follow two pushes when the second completed
  // before the step that pulls began).
  int consecutive = 0;
  for (const std::string& op : pool.log_) {
    consecutive = op == "push" ? consecutive + 1 : 0;
    EXPECT_LE(consecutive, 2);
  }
  EXPECT_EQ(pool.log_.back(), "pull");
}

// A straggler's idling that lasts until the background push has completed:
// compute is slower than the network by construction.
class WaitForPushesClock : public Clock {
 public:
  explicit WaitForPushesClock(FakePool* pool) : pool_(pool) {}
  absl::Time Now() override { return clock_.Now(); }
  void SleepFor(absl::Duration d) override {
    pool_->AwaitPushesDone();
    clock_.SleepFor(d);
  }

 private:
  FakePool* const pool_;
  FakeClock clock_;
};

TEST(TrainerTest, BackgroundPushesStillRefreshTheModelWhenComputeIsSlow) {
  // Pushes complete while the next minibatch is computed, and each is
  // followed by a pull. The trainer sees a push complete when its thread has
  // returned, a moment after the pool applied it: it may find it only just
  // before it starts the next push (the minibatch computed meanwhile joins
  // that push), and then pulls right after. So at most two pushes come
  // between pulls.
  FakePool pool;
  WaitForPushesClock clock(&pool);
  TrainerOptions o = BaseOptions(nullptr);
  o.loop.clock = &clock;
  o.compute_while_pushing = true;
  o.loop.slowdown = 2;
  o.loop.max_steps = 20;
  auto result = Train(&pool, o);
  ASSERT_TRUE(result.ok()) << result.status();
  absl::MutexLock lock(&pool.mu_);
  EXPECT_EQ(pool.minibatches_pushed_, 20);
  int consecutive = 0;
  for (const std::string& op : pool.log_) {
    consecutive = op == "push" ? consecutive + 1 : 0;
    EXPECT_LE(consecutive, 2);
  }
  EXPECT_EQ(pool.log_.back(), "pull");
  // So every gradient was computed on a model that holds every push but the
  // last one before it (push k makes version k + 1).
  ASSERT_EQ(pool.push_bases_.size(), static_cast<size_t>(pool.pushes_));
  for (size_t k = 1; k < pool.push_bases_.size(); ++k) {
    EXPECT_GE(pool.push_bases_[k], k - 1) << "push " << k;
  }
}

// A held pull is released steps_per_pull minibatches after the worker's
// compute first saw it on the wire, and that minibatch's compute lasts until
// it has landed: compute is slower than a pull by construction, and a worker
// that waited for a pull before then would never get there (the pool gives
// up on it after a while, and counts that).
class SlowPulls : public TrainerObserver {
 public:
  SlowPulls(FakePool* pool, int64_t max_steps, int steps_per_pull)
      : pool_(pool), max_steps_(max_steps), steps_per_pull_(steps_per_pull) {}
  void OnStep(const StepReport&) override {
    ++steps_;
    // The first push (this step's) asked for a pull: let it get going.
    if (steps_ == 1) pool_->AwaitPullStarted(1);
    if (pool_->pulls_started() > next_) {
      if (seen_at_ < 0) seen_at_ = steps_;
      if (steps_ - seen_at_ + 1 >= steps_per_pull_) {
        pool_->ReleasePull(next_);
        pool_->AwaitPullDone(next_);
        ++next_;
        seen_at_ = -1;
      }
    }
    if (steps_ == max_steps_) pool_->ReleaseAllPulls();
  }
  void OnPush(const PushReport&) override {}
  void OnHeldoutAccuracy(double) override {}

 private:
  FakePool* const pool_;
  const int64_t max_steps_;
  const int steps_per_pull_;
  int64_t steps_ = 0;
  int64_t next_ = 1;      // the next pull to release
  int64_t seen_at_ = -1;  // the step that first saw it on the wire
};

TEST(TrainerTest, OverlappedPullsNeverKeepTheWorkerWaiting) {
  FakeClock clock;
  FakePool pool;
  pool.hold_pulls_from_ = 1;  // the first pull (before training) goes through
  SlowPulls network(&pool, 30, /*steps_per_pull=*/3);
  TrainerOptions o = BaseOptions(&clock);
  o.overlap_pulls = true;
  o.max_overlapped_steps = 1000;  // no bound: this worker is slower
  o.loop.max_steps = 30;
  o.loop.observer = &network;
  auto result = Train(&pool, o);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->steps, 30);
  absl::MutexLock lock(&pool.mu_);
  EXPECT_EQ(pool.pulls_given_up_, 0) << "the worker waited for a pull";
  EXPECT_EQ(pool.pushes_, 30);
  // Each push names the version of a model the worker had pulled: while a
  // pull is on the wire the worker keeps computing on the previous one and
  // says so, and it moves to every newer one it received.
  ASSERT_EQ(pool.push_bases_.size(), 30u);
  for (size_t i = 0; i < pool.push_bases_.size(); ++i) {
    const uint64_t base = pool.push_bases_[i];
    EXPECT_NE(std::find(pool.pull_versions_.begin(), pool.pull_versions_.end(),
                        base),
              pool.pull_versions_.end())
        << "push " << i << " claims version " << base << ", never pulled";
    if (i > 0) {
      EXPECT_GE(base, pool.push_bases_[i - 1]);
    }
  }
  // Several minibatches were computed on one model while its successor was
  // on the wire (the pull was released only 3 steps later).
  int64_t longest_run = 1, run = 1;
  for (size_t i = 1; i < pool.push_bases_.size(); ++i) {
    run = pool.push_bases_[i] == pool.push_bases_[i - 1] ? run + 1 : 1;
    longest_run = std::max(longest_run, run);
  }
  EXPECT_GE(longest_run, 3);

  // Every pull but the last two (the final one, and one in flight at the
  // end) was taken in; never more pulls than pushes plus those two.
  EXPECT_LE(pool.pulls_started_, pool.pushes_ + 2);
}

// A worker faster than its pulls computes at most max_overlapped_steps
// minibatches on one model while the next is on the wire, then waits for it
// (here every pull lands only after being held for 50 ms).
TEST(TrainerTest, AWorkerFasterThanItsPullsWaitsAfterAFewSteps) {
  FakeClock clock;
  FakePool pool;
  pool.hold_pulls_from_ = 1;
  pool.pull_hold_at_most_ = absl::Milliseconds(50);
  TrainerOptions o = BaseOptions(&clock);
  o.overlap_pulls = true;
  o.max_overlapped_steps = 2;
  o.loop.max_steps = 12;
  auto result = Train(&pool, o);
  ASSERT_TRUE(result.ok()) << result.status();
  absl::MutexLock lock(&pool.mu_);
  EXPECT_GT(pool.pulls_given_up_, 0);  // pulls were waited for
  ASSERT_EQ(pool.push_bases_.size(), 12u);
  int64_t run = 1;
  for (size_t i = 1; i < pool.push_bases_.size(); ++i) {
    run = pool.push_bases_[i] == pool.push_bases_[i - 1] ? run + 1 : 1;
    EXPECT_LE(run, 2) << "push " << i;
  }
}

TEST(TrainerTest, OverlappedPullsAfterAStaleDropWaitForAFreshModel) {
  FakeClock clock;
  FakePool pool;
  pool.drop_every_ = 4;
  TrainerOptions o = BaseOptions(&clock);
  o.overlap_pulls = true;
  o.loop.max_steps = 40;
  auto result = Train(&pool, o);
  ASSERT_TRUE(result.ok()) << result.status();
  absl::MutexLock lock(&pool.mu_);
  EXPECT_EQ(result->pushes_dropped,
            static_cast<int64_t>(pool.drops_at_version_.size()));
  ASSERT_EQ(pool.drops_at_version_.size(), 10u);
  // The push after a drop (push number p, counted from 1, is at index p of
  // push_bases_) was computed from a model pulled after the drop.
  for (const auto& [push, version] : pool.drops_at_version_) {
    if (static_cast<size_t>(push) >= pool.push_bases_.size()) continue;
    EXPECT_GE(pool.push_bases_[push], version) << "push " << push;
  }
}

class RetryCounter : public TrainerObserver {
 public:
  void OnStep(const StepReport&) override {}
  void OnPush(const PushReport&) override {}
  void OnHeldoutAccuracy(double) override {}
  void OnRpcRetry() override { ++retries; }
  int retries = 0;
};

TEST(TrainerTest, RetriesPullsAndPushesWhileTheServerIsAway) {
  FakeClock clock;
  FakePool pool;
  {
    absl::MutexLock lock(&pool.mu_);
    pool.fail_pulls_ = 3;
    pool.fail_pushes_ = 2;
  }
  RetryCounter counter;
  TrainerOptions o = BaseOptions(&clock);
  o.initial_backoff = absl::Milliseconds(100);
  o.max_backoff = absl::Milliseconds(400);
  o.loop.observer = &counter;
  auto result = Train(&pool, o);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->steps, 40);
  EXPECT_EQ(counter.retries, 5);
  // Three pull retries back off 100, 200 and 400 ms (each ×[0.5, 1.5)),
  // then two push retries 100 and 200 ms: 1 s ×[0.5, 1.5).
  EXPECT_GE(clock.Sleeps(), absl::Milliseconds(500));
  EXPECT_LT(clock.Sleeps(), absl::Milliseconds(1500));
  absl::MutexLock lock(&pool.mu_);
  EXPECT_EQ(pool.pushes_, 38);  // the two lost pushes were not resent
  // After a failed push the next call is a (fresh) pull.
  for (size_t i = 0; i + 1 < pool.log_.size(); ++i) {
    if (pool.log_[i] == "push-failed") {
      EXPECT_EQ(pool.log_[i + 1], "pull");
    }
  }
}

TEST(TrainerTest, GivesUpWhenTheServerStaysAway) {
  FakeClock clock;
  FakePool pool;
  {
    absl::MutexLock lock(&pool.mu_);
    pool.fail_pulls_ = 1000000;
  }
  TrainerOptions o = BaseOptions(&clock);
  o.initial_backoff = absl::Milliseconds(100);
  o.max_backoff = absl::Seconds(1);
  o.max_retry_time = absl::Seconds(30);
  auto result = Train(&pool, o);
  EXPECT_EQ(result.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(result.status().message().find("retries"), absl::string_view::npos);
  // It kept trying for the whole budget, and not much longer.
  EXPECT_GE(clock.Sleeps(), absl::Seconds(30));
  EXPECT_LT(clock.Sleeps(), absl::Seconds(32));
}

constexpr char kRunId[] = "trainer-test-run-id-0123456789ab";

TEST(TrainerTest, TheSharedPoolNeedsARunId) {
  FakeClock clock;
  FakePool pool;
  TrainerOptions o = BaseOptions(&clock);
  o.loop.max_steps = 0;
  o.loop.epochs = 1;
  o.use_pool = true;
  for (const std::string& run_id : {std::string(), std::string("short")}) {
    o.pool_run_id = run_id;
    auto result = Train(&pool, o);
    EXPECT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(result.status().message().find("run id"), absl::string_view::npos)
        << result.status();
  }
  absl::MutexLock lock(&pool.mu_);
  EXPECT_TRUE(pool.fetch_run_ids_.empty());
}

// A pool with no room for the run's dataset (RESOURCE_EXHAUSTED) is asked
// again with the backoff, and the worker trains once there is room.
TEST(TrainerTest, AFullPoolIsAskedAgainUntilThereIsRoom) {
  FakeClock clock;
  FakePool pool;
  {
    absl::MutexLock lock(&pool.mu_);
    pool.fetch_errors_.assign(
        3, absl::ResourceExhaustedError("the minibatch pool already serves"));
  }
  RetryCounter counter;
  TrainerOptions o = BaseOptions(&clock);
  o.loop.max_steps = 0;
  o.loop.epochs = 1;
  o.loop.observer = &counter;
  o.use_pool = true;
  o.pool_run_id = kRunId;
  o.initial_backoff = absl::Milliseconds(100);
  o.max_backoff = absl::Seconds(1);
  std::ostringstream log;
  auto result = Train(&pool, o, 0, 1, &log);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->steps, 1000 / 16);  // every batch of the one epoch
  EXPECT_EQ(counter.retries, 3);
  // 100, 200 and 400 ms, each ×[0.5, 1].
  EXPECT_GE(clock.Sleeps(), absl::Milliseconds(350));
  EXPECT_LE(clock.Sleeps(), absl::Milliseconds(700));
  EXPECT_NE(log.str().find("no room for this run's dataset"),
            std::string::npos)
      << log.str();
  absl::MutexLock lock(&pool.mu_);
  for (const std::string& id : pool.fetch_run_ids_) EXPECT_EQ(id, kRunId);
}

TEST(TrainerTest, GivesUpOnAPoolThatStaysFull) {
  FakeClock clock;
  FakePool pool;
  {
    absl::MutexLock lock(&pool.mu_);
    pool.fetch_always_ =
        absl::ResourceExhaustedError("the minibatch pool already serves");
  }
  TrainerOptions o = BaseOptions(&clock);
  o.loop.max_steps = 0;
  o.loop.epochs = 1;
  o.use_pool = true;
  o.pool_run_id = kRunId;
  o.max_retry_time = absl::Minutes(5);
  auto result = Train(&pool, o);
  EXPECT_EQ(result.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(result.status().message().find("retries"), absl::string_view::npos)
      << result.status();
  EXPECT_GE(clock.Sleeps(), absl::Minutes(5));
  EXPECT_LT(clock.Sleeps(), absl::Minutes(5) + absl::Seconds(2));
}

// Any other refusal of the pool is final: a request the pool calls invalid
// will not become valid.
TEST(TrainerTest, AnInvalidPoolRequestIsFinal) {
  FakeClock clock;
  FakePool pool;
  {
    absl::MutexLock lock(&pool.mu_);
    pool.fetch_errors_ = {absl::InvalidArgumentError("bad pool request")};
  }
  TrainerOptions o = BaseOptions(&clock);
  o.loop.max_steps = 0;
  o.loop.epochs = 1;
  o.use_pool = true;
  o.pool_run_id = kRunId;
  EXPECT_EQ(Train(&pool, o).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(clock.Sleeps(), absl::ZeroDuration());
}

// What the worker does after a failed push depends on the status code and
// the refusal only: an overloaded server (any refusal, whatever the text) is
// "busy": pull and go on at once; a plain UNAVAILABLE (even one saying
// "busy") and ABORTED are retried after a backoff; INVALID_ARGUMENT is
// final, even when its text says "from the future".
TEST(TrainerTest, RetryDecisionsFollowTheCodeAndTheRefusalNotTheText) {
  FakeClock clock;
  FakePool pool;
  {
    absl::MutexLock lock(&pool.mu_);
    pool.push_errors_ = {
        WithRefusal(absl::UnavailableError("queues full"), Refusal::kBusy),
        WithRefusal(absl::UnavailableError("no memory"), Refusal::kPushMemory),
        WithRefusal(absl::UnavailableError("too many"), Refusal::kPeerLimit),
        absl::UnavailableError("server busy: apply queues are full"),
        absl::AbortedError("pull again"),
    };
  }
  RetryCounter counter;
  TrainerOptions o = BaseOptions(&clock);
  o.loop.observer = &counter;
  auto result = Train(&pool, o);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->pushes_busy, 3);
  EXPECT_EQ(counter.retries, 2);
  absl::MutexLock lock(&pool.mu_);
  EXPECT_EQ(pool.pushes_, 35);  // none of the 5 refused ones was resent
}

TEST(TrainerTest, InvalidArgumentIsFinalWhateverItsText) {
  FakeClock clock;
  FakePool pool;
  {
    absl::MutexLock lock(&pool.mu_);
    pool.push_errors_ = {absl::InvalidArgumentError(
        "push computed from version 9 (a version from the future)")};
  }
  auto result = Train(&pool, BaseOptions(&clock));
  EXPECT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument);
}

// The waits between retries, as the worker logs them ("retry N in X").
std::vector<absl::Duration> LoggedWaits(const std::string& log) {
  std::vector<absl::Duration> waits;
  std::istringstream in(log);
  std::string line;
  while (std::getline(in, line)) {
    const size_t at = line.rfind(" in ");
    if (line.find("; retry ") == std::string::npos || at == std::string::npos) {
      continue;
    }
    absl::Duration d;
    if (absl::ParseDuration(line.substr(at + 4), &d)) waits.push_back(d);
  }
  return waits;
}

// Workers that lost the same server come back at different times: the
// jitter comes from a per-worker seed (by default the worker index, the
// process id and the clock), and no wait passes max_backoff.
TEST(TrainerTest, BackoffJitterIsPerWorkerAndBounded) {
  EXPECT_NE(JitterSeed(0), JitterSeed(1));
  EXPECT_NE(JitterSeed(0), JitterSeed(0));  // the clock moved
  auto waits_with_seed = [&](uint64_t seed) {
    FakeClock clock;
    FakePool pool;
    {
      absl::MutexLock lock(&pool.mu_);
      pool.fail_pulls_ = 8;
    }
    TrainerOptions o = BaseOptions(&clock);
    o.loop.max_steps = 2;
    o.initial_backoff = absl::Milliseconds(1);
    o.max_backoff = absl::Milliseconds(8);
    o.jitter_seed = seed;
    std::ostringstream log;
    EXPECT_TRUE(Train(&pool, o, 0, 1, &log).ok());
    return LoggedWaits(log.str());
  };
  const std::vector<absl::Duration> a = waits_with_seed(1);
  const std::vector<absl::Duration> b = waits_with_seed(2);
  ASSERT_EQ(a.size(), 8u);
  ASSERT_EQ(b.size(), 8u);
  EXPECT_NE(a, b);
  EXPECT_EQ(a, waits_with_seed(1));  // a seed gives the same waits
  for (size_t i = 0; i < a.size(); ++i) {
    const absl::Duration full =
        std::min(absl::Milliseconds(1) * (1 << i), absl::Milliseconds(8));
    for (absl::Duration w : {a[i], b[i]}) {
      EXPECT_GE(w, full / 2) << i;
      EXPECT_LE(w, full) << i;
    }
  }
}

TEST(TrainerTest, PushEveryBeyondTheServersLimitIsRefusedAtStart) {
  FakeClock clock;
  FakePool pool;
  pool.max_push_minibatches_ = 4;
  TrainerOptions o = BaseOptions(&clock);
  o.push_every = 5;
  EXPECT_EQ(Train(&pool, o).status().code(),
            absl::StatusCode::kInvalidArgument);
  // Computing while pushing never puts more than the limit into one push,
  // even when the network is slow enough for 8: a push is released after 8
  // more minibatches, or (when the worker stops at the limit and waits for
  // it) after 50 ms.
  {
    absl::MutexLock lock(&pool.mu_);
    pool.hold_pushes_ = true;
  }
  pool.hold_at_most_ = absl::Milliseconds(50);
  SlowNetwork network(&pool, 40, /*steps_per_push=*/8);
  o.push_every = 1;
  o.compute_while_pushing = true;
  o.max_minibatches_per_push = 8;
  o.loop.observer = &network;
  auto result = Train(&pool, o);
  ASSERT_TRUE(result.ok()) << result.status();
  absl::MutexLock lock(&pool.mu_);
  EXPECT_EQ(pool.max_minibatches_, 4);
  EXPECT_EQ(pool.minibatches_pushed_, 40);
}

TEST(TrainerTest, SgdModeTrainsLocallyAndHandsTheModelOver) {
  FakeClock clock;
  FakePool pool;
  TrainerOptions o = BaseOptions(&clock);
  o.mode = TrainMode::kSgd;
  o.loop.max_steps = 100;
  auto result = Train(&pool, o);
  ASSERT_TRUE(result.ok()) << result.status();
  absl::MutexLock lock(&pool.mu_);
  EXPECT_EQ(pool.pushes_, 0);
  EXPECT_EQ(Count(pool.log_, "assign"), 1);
  EXPECT_EQ(result->params, pool.assigned_);  // the final pull got it back
  EXPECT_NE(pool.assigned_, InitialParams(SmallSpec(), 1));
  EXPECT_GT(result->heldout_accuracy, 0.6);  // it learned the toy task
}

// Minibatches drawn ahead on a thread of their own are the same ones in the
// same order: local SGD ends with the same model, bit for bit, from the
// worker's own examples and from streamed data, and the same steps and
// frames; a depth outside [0, 16] is refused.
TEST(TrainerTest, PrefetchedMinibatchesTrainTheSameModel) {
  const Utterances utts = ToyUtterances(1);
  for (bool streamed : {false, true}) {
    SCOPED_TRACE(streamed ? "streamed" : "own examples");
    std::vector<TrainResult> results;
    for (int prefetch : {0, 1, 3}) {
      FakeClock clock;
      FakePool pool;
      TrainerOptions o = BaseOptions(&clock);
      o.mode = TrainMode::kSgd;
      o.loop.max_steps = 60;
      o.prefetch_batches = prefetch;
      if (streamed) {
        o.open_source = [&](uint64_t seed, double epochs)
            -> absl::StatusOr<std::unique_ptr<BatchSource>> {
          StreamOptions so;
          so.window_bytes = 300 * ExampleBytesPerFrame(4);
          so.seed = seed;
          so.epochs = epochs;
          auto source = StreamSource::Create(
              std::make_unique<UtterancesStream>(&utts), SmallSpec(), {}, so);
          if (!source.ok()) return source.status();
          return std::unique_ptr<BatchSource>(*std::move(source));
        };
      }
      auto result = Train(&pool, o);
      ASSERT_TRUE(result.ok()) << result.status();
      results.push_back(*std::move(result));
    }
    for (size_t i = 1; i < results.size(); ++i) {
      EXPECT_EQ(results[i].steps, results[0].steps);
      EXPECT_EQ(results[i].frames, results[0].frames);
      EXPECT_EQ(results[i].params, results[0].params) << "depth index " << i;
    }
    EXPECT_NE(results[0].params, InitialParams(SmallSpec(), 1));
  }
  for (int bad : {-1, 17}) {
    FakeClock clock;
    FakePool pool;
    TrainerOptions o = BaseOptions(&clock);
    o.prefetch_batches = bad;
    EXPECT_EQ(Train(&pool, o).status().code(),
              absl::StatusCode::kInvalidArgument)
        << bad;
  }
}

// With a backend that stages minibatches, the trainer hands it each one a
// step ahead (worker/data/look_ahead_source.h): every gradient call but the
// first computes the batch announced, unchanged since, and the model is the
// one trained without staging (and with nothing drawn ahead: prefetch 0).
TEST(TrainerTest, AStagingBackendGetsEachMinibatchAStepAhead) {
  const Utterances train_utts = ToyUtterances(1);
  const ModelSpec spec = SmallSpec();
  auto train = MakeExamples(spec, &train_utts, ToyDataOptions());
  auto heldout = MakeExamples(spec, &train_utts, ToyDataOptions());
  ASSERT_TRUE(train.ok() && heldout.ok());
  for (TrainMode mode : {TrainMode::kSgd, TrainMode::kAsgd}) {
    SCOPED_TRACE(mode == TrainMode::kSgd ? "sgd" : "asgd, resident model");
    std::vector<TrainResult> results;
    for (int prefetch : {0, 2}) {
      for (bool staging : {false, true}) {
        FakeClock clock;
        FakePool pool;
        TrainerOptions o = BaseOptions(&clock);
        o.mode = mode;
        o.resident_model = mode == TrainMode::kAsgd;
        o.loop.max_steps = 30;
        o.prefetch_batches = prefetch;
        const int rows = ShapeOfBatch(**train, o.loop.batch_size).rows();
        auto cpu = CreateCpuBackend(spec, rows);
        ASSERT_TRUE(cpu.ok());
        StagingSpy* spy;
        std::unique_ptr<ModelBackend> backend =
            MaybeStaging(*std::move(cpu), staging, &spy);
        Trainer trainer(&pool, backend.get(), train->get(), heldout->get(), o,
                        nullptr);
        auto result = trainer.Run();
        ASSERT_TRUE(result.ok()) << result.status();
        EXPECT_EQ(result->steps, 30);
        results.push_back(*std::move(result));
        if (spy == nullptr) continue;
        EXPECT_EQ(spy->calls, 30);
        EXPECT_EQ(spy->changed_since_announced, 0);
        if (prefetch == 0) {  // nothing drawn ahead, nothing announced
          EXPECT_EQ(spy->announcements, 0);
        } else {
          EXPECT_EQ(spy->staged_calls, 29);
          EXPECT_EQ(spy->announcements, 30);  // one drawn ahead, unused
        }
      }
    }
    for (size_t i = 1; i < results.size(); ++i) {
      EXPECT_EQ(results[i].params, results[0].params) << "run " << i;
    }
  }
}

TEST(TrainerTest, WarmStartHandsOverBeforeAnyAsynchronousPush) {
  FakePool pool;
  absl::StatusOr<TrainResult> results[2];
  std::thread other([&] {
    FakeClock clock;  // worker 1 polls for the model on its own clock
    TrainerOptions o1 = BaseOptions(&clock);
    o1.warm_start_epochs = 0.5;
    o1.loop.worker_index = 1;
    // Its fake clock runs through any finite timeout in a few ms of polls,
    // however long worker 0 (a real thread) takes: wait for the hand-over.
    o1.warm_start_timeout = absl::InfiniteDuration();
    results[1] = Train(&pool, o1, 1, 2);
  });
  FakeClock clock;
  TrainerOptions o = BaseOptions(&clock);
  o.warm_start_epochs = 0.5;
  results[0] = Train(&pool, o, 0, 2);
  other.join();
  ASSERT_TRUE(results[0].ok()) << results[0].status();
  ASSERT_TRUE(results[1].ok()) << results[1].status();
  absl::MutexLock lock(&pool.mu_);
  auto assign = std::find(pool.log_.begin(), pool.log_.end(), "assign");
  ASSERT_NE(assign, pool.log_.end());
  EXPECT_EQ(std::find(pool.log_.begin(), assign, "push"), assign)
      << "a gradient was pushed before the warm-start model arrived";
  EXPECT_NE(pool.assigned_, InitialParams(SmallSpec(), 1));
  EXPECT_EQ(pool.pushes_, 80);
}

// The toy task plus one utterance with a NaN in every frame, as data read
// without checks could hold: a minibatch with one of its frames gets a
// non-finite gradient (and maybe loss).
Utterances ToyWithNaN() {
  Utterances utts = ToyUtterances(1);
  std::vector<float> f(50 * 4, 1.0f);
  for (int t = 0; t < 50; ++t) f[t * 4 + 2] = std::nanf("");
  utts.Add(f, std::vector<int32_t>(50, 0));
  return utts;
}

// A minibatch whose loss or gradient is not finite stops the worker before
// its gradient is pushed: the pool's model stays finite, every earlier
// minibatch was pushed, and the error (typed: IsNonFiniteStep) blames the
// step, the epoch and the data, not a server. In asgd mode (with and without
// pushes on the wire while it computes) and in sgd mode, whose model would
// go to the servers at the end.
TEST(TrainerTest, NonFiniteGradientStopsTheWorkerBeforeItPushes) {
  for (TrainMode mode : {TrainMode::kAsgd, TrainMode::kSgd}) {
    for (bool background : {false, true}) {
      if (mode == TrainMode::kSgd && background) continue;
      FakeClock clock;
      FakePool pool;
      const Utterances train_utts = ToyWithNaN();
      const ModelSpec& spec = pool.model();
      auto train = MakeExamples(spec, &train_utts, ToyDataOptions());
      ASSERT_TRUE(train.ok());
      TrainerOptions o = BaseOptions(&clock);
      o.mode = mode;
      o.compute_while_pushing = background;
      o.loop.max_steps = 500;
      o.loop.data_source = "the toy task with NaN";
      auto backend = CreateCpuBackend(
          spec, ShapeOfBatch(**train, o.loop.batch_size).rows());
      ASSERT_TRUE(backend.ok());
      Trainer trainer(&pool, backend->get(), train->get(), nullptr, o, nullptr);
      const absl::StatusOr<TrainResult> result = trainer.Run();
      ASSERT_FALSE(result.ok());
      const absl::Status& s = result.status();
      EXPECT_TRUE(IsNonFiniteStep(s)) << s;
      EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
      for (const char* part :
           {"worker 0: training step ", "non-finite gradient", "epoch 0.",
            "the toy task with NaN", "some inputs are NaN or Inf",
            "the worker stops before it reaches the servers"}) {
        EXPECT_NE(s.message().find(part), absl::string_view::npos)
            << part << " in " << s;
      }
      pool.AwaitPushesDone();
      absl::MutexLock lock(&pool.mu_);
      for (float w : pool.model_) ASSERT_TRUE(std::isfinite(w)) << s;
      EXPECT_EQ(Count(pool.log_, "assign"), 0);  // sgd: no hand-over
      if (mode == TrainMode::kAsgd) {
        // Every minibatch before the bad one was pushed, the bad one not.
        EXPECT_GT(pool.minibatches_pushed_, 0);
        EXPECT_NE(s.message().find(absl::StrCat(
                      "training step ", pool.minibatches_pushed_ + 1, " ")),
                  absl::string_view::npos)
            << s << " after " << pool.minibatches_pushed_ << " minibatches";
      }
    }
  }
}

// A model that diverged (here: a NaN weight on the pool) gives a non-finite
// loss on ordinary data: stopped at the first minibatch, nothing pushed.
TEST(TrainerTest, NonFiniteLossOfADivergedModelIsNotPushed) {
  FakeClock clock;
  FakePool pool;
  {
    absl::MutexLock lock(&pool.mu_);
    pool.model_.back() = std::nanf("");  // an output bias
  }
  const absl::Status s = Train(&pool, BaseOptions(&clock)).status();
  EXPECT_TRUE(IsNonFiniteStep(s)) << s;
  EXPECT_NE(s.message().find("training step 1 "), absl::string_view::npos) << s;
  EXPECT_NE(s.message().find("a non-finite loss (nan)"),
            absl::string_view::npos)
      << s;
  absl::MutexLock lock(&pool.mu_);
  EXPECT_EQ(pool.pushes_, 0);
  EXPECT_EQ(Count(pool.log_, "push"), 0);
}

TEST(TrainerTest, StragglerIdlesInProportionToItsCompute) {
  FakeClock clock;
  clock.set_tick(absl::Milliseconds(1));  // every minibatch "computes" 1 ms
  FakePool pool;
  TrainerOptions o = BaseOptions(&clock);
  o.loop.slowdown = 3;
  o.loop.max_steps = 10;
  auto result = Train(&pool, o);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(clock.Sleeps(), absl::Milliseconds(10 * 2));
  EXPECT_NEAR(result->phases.idle, 10 * 0.003, 1e-9);  // sleep + tick
}

TEST(TrainerTest, StopsAtTheTimeBudget) {
  FakeClock clock;
  clock.set_tick(absl::Milliseconds(1));  // time moves 1 ms per reading
  FakePool pool;
  TrainerOptions o = BaseOptions(&clock);
  o.loop.max_steps = 0;
  o.loop.epochs = 0;
  o.loop.max_seconds = 0.1;
  auto result = Train(&pool, o);
  ASSERT_TRUE(result.ok()) << result.status();
  // About 7 clock readings per step: the budget ends it after some steps,
  // long before the data would.
  EXPECT_GT(result->steps, 5);
  EXPECT_LT(result->steps, 30);
  o.mode = TrainMode::kSync;
  o.loop.max_steps = 10;
  EXPECT_EQ(Train(&pool, o).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(TrainerTest, SyncModeNeedsAStepCountAndOnePushPerStep) {
  FakeClock clock;
  FakePool pool;
  TrainerOptions o = BaseOptions(&clock);
  o.mode = TrainMode::kSync;
  o.loop.max_steps = 0;
  EXPECT_EQ(Train(&pool, o).status().code(),
            absl::StatusCode::kInvalidArgument);
  o.loop.max_steps = 10;
  o.push_every = 2;
  EXPECT_EQ(Train(&pool, o).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// Streamed data (open_source) ends at its epochs like data in memory; the
// shared pool, which needs every example at hand, refuses it.
TEST(TrainerTest, StreamedDataEndsAtItsEpochsAndTheSharedPoolRefusesIt) {
  FakeClock clock;
  FakePool pool(SmallSpec(), 0.2f);
  const Utterances utts = ToyUtterances(1);  // 20 x 50 frames
  TrainerOptions o = BaseOptions(&clock);
  o.loop.batch_size = 64;
  o.loop.max_steps = 0;
  o.loop.epochs = 2;
  o.open_source = [&](uint64_t seed, double epochs)
      -> absl::StatusOr<std::unique_ptr<BatchSource>> {
    StreamOptions s;
    s.window_bytes = 300 * ExampleBytesPerFrame(4);
    s.seed = seed;
    s.epochs = epochs;
    auto source = StreamSource::Create(std::make_unique<UtterancesStream>(&utts),
                                       SmallSpec(), {}, s);
    if (!source.ok()) return source.status();
    return std::unique_ptr<BatchSource>(*std::move(source));
  };
  auto result = Train(&pool, o);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->steps, 2 * 1000 / 64);  // whole minibatches
  EXPECT_EQ(result->frames, 2 * 1000 / 64 * 64);
  o.use_pool = true;
  EXPECT_EQ(Train(&pool, o).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// Every training mode of the trainer trains every model kind: the toy task is
// learned well above chance (33%) whatever the model and the mode.
struct KindAndMode {
  std::string kind;
  // asgd, accumulate, background, overlap, sgd, warm_start; streamed_*: the
  // same with minibatches streamed through a window of 120 frames
  // (StreamSource)
  std::string mode;
};

class EveryModelKindTest : public ::testing::TestWithParam<KindAndMode> {};

TEST_P(EveryModelKindTest, LearnsTheToyTask) {
  const KindAndMode& p = GetParam();
  FakeClock clock;
  FakePool pool(ToyModel(p.kind), 0.2f);
  TrainerOptions o = BaseOptions(&clock);
  o.loop.batch_size = 20;
  o.loop.max_steps = 150;
  if (p.mode == "accumulate") o.push_every = 3;
  if (p.mode == "background") o.compute_while_pushing = true;
  if (p.mode == "overlap") {
    o.compute_while_pushing = true;
    o.overlap_pulls = true;
  }
  if (p.mode == "sgd") o.mode = TrainMode::kSgd;
  if (p.mode == "warm_start" || p.mode == "streamed_warm_start") {
    o.warm_start_epochs = 0.5;
  }
  pool.attributes_["learning_rate"] = "0.2";
  const Utterances train_utts = ToyUtterances(1);
  int opened = 0;
  const ModelSpec spec = ToyModel(p.kind);
  if (p.mode.rfind("streamed", 0) == 0) {
    o.open_source = [&](uint64_t seed, double epochs)
        -> absl::StatusOr<std::unique_ptr<BatchSource>> {
      ++opened;
      StreamOptions s;
      s.window_bytes = 120 * ExampleBytesPerFrame(spec.feature_dim);
      s.seed = seed;
      s.epochs = epochs;
      auto source =
          StreamSource::Create(std::make_unique<UtterancesStream>(&train_utts),
                               spec, ToyDataOptions(), s);
      if (!source.ok()) return source.status();
      return std::unique_ptr<BatchSource>(*std::move(source));
    };
  }
  auto result = Train(&pool, o);
  ASSERT_TRUE(result.ok()) << result.status();
  if (o.open_source) {
    EXPECT_EQ(opened, o.warm_start_epochs > 0 ? 2 : 1);
  }
  EXPECT_EQ(result->steps, 150);
  // Sequence models count only the labelled frames of their chunks.
  EXPECT_GE(result->frames, 150 * 10);
  EXPECT_GT(result->heldout_accuracy, 0.8) << p.kind << " " << p.mode;
}

std::vector<KindAndMode> KindsAndModes() {
  std::vector<KindAndMode> out;
  for (const char* kind : {"dnn", "cnn", "lstm", "blstm"}) {
    for (const char* mode :
         {"asgd", "accumulate", "background", "overlap", "sgd", "warm_start",
          "streamed_asgd", "streamed_warm_start"}) {
      out.push_back({kind, mode});
    }
  }
  return out;
}

INSTANTIATE_TEST_SUITE_P(KindsAndModes, EveryModelKindTest,
                         ::testing::ValuesIn(KindsAndModes()),
                         [](const auto& info) {
                           return info.param.kind + "_" + info.param.mode;
                         });

}  // namespace
}  // namespace asgd
