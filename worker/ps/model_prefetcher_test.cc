// ModelPrefetcher against an in-memory pool whose pulls the test holds back:
// what the worker sees never waits for a pull, the model and its versions
// change together, and pulls asked for during a pull follow it.
#include "worker/ps/model_prefetcher.h"

#include <algorithm>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "gtest/gtest.h"
#include "worker/data/toy_task.h"

namespace asgd {
namespace {

// A pool whose model is `version` in every element, one version per pull;
// each pull waits until the test released it (or fails when told to).
class HeldPool : public ParamClient {
 public:
  HeldPool()
      : spec_(ToyModel("dnn")),
        layout_(*ModelLayout::Create(ModelTensors(spec_), 1, 1)) {}
  const ModelLayout& layout() const override { return layout_; }
  const ModelSpec& model() const override { return spec_; }
  const std::map<std::string, std::string>& attributes() const override {
    return attributes_;
  }
  using ParamClient::Pull;
  absl::Status Pull(PullSink* sink, std::vector<uint64_t>* versions) override {
    const absl::Span<float> params = sink->Staging({0, sink->size()});
    absl::MutexLock lock(&mu_);
    const int64_t me = started_++;
    auto released = [this, me]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return released_ > me;
    };
    mu_.Await(absl::Condition(&released));
    if (fail_next_) {
      fail_next_ = false;
      return absl::UnavailableError("server restarting");
    }
    ++version_;
    std::fill(params.begin(), params.end(), static_cast<float>(version_));
    *versions = {version_};
    return sink->Commit({0, sink->size()});
  }
  // The trainer pushes host gradients (Push); encoded pushes are not used.
  std::vector<absl::StatusOr<ServerPushReply>> PushEncoded(
      const std::vector<ServerPush>& parts, const std::vector<uint64_t>&,
      int) override {
    return std::vector<absl::StatusOr<ServerPushReply>>(
        parts.size(), absl::UnimplementedError("not used by the trainer"));
  }
  absl::StatusOr<PushOutcome> Push(absl::Span<const float>,
                                   const std::vector<uint64_t>&, int,
                                   PushKind) override {
    return absl::UnimplementedError("pulls only");
  }
  absl::StatusOr<std::vector<uint64_t>> Versions() override {
    return absl::UnimplementedError("pulls only");
  }
  absl::StatusOr<PoolGrant> FetchBatches(const std::string&, uint64_t, int,
                                         double, int) override {
    return absl::UnimplementedError("pulls only");
  }

  void Release() {
    absl::MutexLock lock(&mu_);
    ++released_;
  }
  void FailNext() {
    absl::MutexLock lock(&mu_);
    fail_next_ = true;
  }
  int64_t started() {
    absl::MutexLock lock(&mu_);
    return started_;
  }
  // Waits until `n` pulls have started.
  void AwaitStarted(int64_t n) {
    absl::MutexLock lock(&mu_);
    auto done = [this, n]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return started_ >= n;
    };
    mu_.Await(absl::Condition(&done));
  }

 private:
  const ModelSpec spec_;
  const ModelLayout layout_;
  std::map<std::string, std::string> attributes_;
  absl::Mutex mu_;
  int64_t started_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t released_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t version_ ABSL_GUARDED_BY(mu_) = 0;
  bool fail_next_ ABSL_GUARDED_BY(mu_) = false;
};

TEST(ModelPrefetcherTest, NeverWaitsAndSwapsModelAndVersionsTogether) {
  HeldPool pool;
  const int64_t n = pool.layout().total_size();
  std::vector<float> params(n, 0.0f);
  std::vector<uint64_t> versions = {0};
  ModelPrefetcher prefetcher(&pool, n);
  prefetcher.Request();
  pool.AwaitStarted(1);
  // The pull is held: the worker goes on with the model it has, as often as
  // it likes, without waiting.
  for (int step = 0; step < 5; ++step) {
    auto taken = prefetcher.TakeIfReady(&params, &versions);
    ASSERT_TRUE(taken.ok());
    EXPECT_FALSE(*taken);
    EXPECT_EQ(params[0], 0.0f);
    EXPECT_EQ(versions, std::vector<uint64_t>{0});
  }
  EXPECT_TRUE(prefetcher.pull_in_flight());
  pool.Release();
  auto taken = prefetcher.Wait(&params, &versions);
  ASSERT_TRUE(taken.ok());
  EXPECT_TRUE(*taken);
  // Every element and the versions come from the same pull.
  EXPECT_EQ(versions, std::vector<uint64_t>{1});
  EXPECT_TRUE(std::all_of(params.begin(), params.end(),
                          [](float x) { return x == 1.0f; }));
  EXPECT_EQ(prefetcher.pulls(), 1);
  // Nothing new was asked for: nothing more lands.
  taken = prefetcher.TakeIfReady(&params, &versions);
  ASSERT_TRUE(taken.ok());
  EXPECT_FALSE(*taken);
}

TEST(ModelPrefetcherTest, RequestsDuringAPullAreServedByOneMorePullAfterIt) {
  HeldPool pool;
  const int64_t n = pool.layout().total_size();
  std::vector<float> params(n);
  std::vector<uint64_t> versions;
  ModelPrefetcher prefetcher(&pool, n);
  prefetcher.Request();
  pool.AwaitStarted(1);
  // Three pushes complete while the pull is on the wire: one pull follows.
  prefetcher.Request();
  prefetcher.Request();
  prefetcher.Request();
  EXPECT_EQ(pool.started(), 1);  // never two pulls at once
  pool.Release();
  auto first = prefetcher.Wait(&params, &versions);
  ASSERT_TRUE(first.ok() && *first);
  EXPECT_EQ(versions, std::vector<uint64_t>{1});
  pool.AwaitStarted(2);
  pool.Release();
  auto second = prefetcher.Wait(&params, &versions);
  ASSERT_TRUE(second.ok() && *second);
  EXPECT_EQ(versions, std::vector<uint64_t>{2});
  EXPECT_EQ(params[0], 2.0f);
  EXPECT_EQ(prefetcher.pulls(), 2);
  EXPECT_FALSE(prefetcher.pull_in_flight());
}

TEST(ModelPrefetcherTest, AFailedPullIsReportedOnceAndKeepsTheModel) {
  HeldPool pool;
  const int64_t n = pool.layout().total_size();
  std::vector<float> params(n, 7.0f);
  std::vector<uint64_t> versions = {7};
  ModelPrefetcher prefetcher(&pool, n);
  pool.FailNext();
  prefetcher.Request();
  pool.Release();
  auto failed = prefetcher.Wait(&params, &versions);
  EXPECT_EQ(failed.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(params[0], 7.0f);
  EXPECT_EQ(versions, std::vector<uint64_t>{7});
  auto after = prefetcher.TakeIfReady(&params, &versions);
  ASSERT_TRUE(after.ok());
  EXPECT_FALSE(*after);
}

}  // namespace
}  // namespace asgd
