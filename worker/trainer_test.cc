// The worker-side controls a user would notice, each checked on what reaches
// the parameter servers.
#include "worker/trainer.h"

#include <functional>
#include <random>
#include <sstream>
#include <thread>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/refusal.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "proto/asgd.grpc.pb.h"
#include "server/grpc_server.h"
#include "worker/grpc_param_client.h"

namespace asgd {
namespace {

DnnSpec SmallSpec() {
  DnnSpec spec;
  spec.input_dim = 3 * 4;  // context 1, 4 features
  spec.hidden = {8};
  spec.num_classes = 3;
  return spec;
}

// Frames whose features carry their label, so training can learn them.
struct Data {
  corpus::CorpusInfo info;
  std::vector<corpus::Utterance> utts;
  Data() {
    info.feature_dim = 4;
    info.num_classes = 3;
    info.mean.assign(4, 0.0f);
    info.stddev.assign(4, 1.0f);
    std::mt19937 rng(1);
    std::normal_distribution<float> noise(0, 0.3f);
    for (int u = 0; u < 20; ++u) {
      corpus::Utterance utt;
      utt.num_frames = 50;
      for (int t = 0; t < 50; ++t) {
        const int label = (t / 5 + u) % 3;
        for (int d = 0; d < 4; ++d) {
          utt.features.push_back((d == label ? 2.0f : 0.0f) + noise(rng));
        }
        utt.labels.push_back(label);
      }
      utts.push_back(std::move(utt));
    }
  }
};

// A one-server pool in memory: plain SGD, records every call.
class FakePool : public ParamClient {
 public:
  explicit FakePool(float lr = 0.1f)
      : layout_(*ModelLayout::Create(DnnTensors(SmallSpec()), 1, 1)),
        model_(InitialDnnParams(SmallSpec(), 1)),
        lr_(lr) {
    attributes_["activation"] = "relu";
    attributes_["learning_rate"] = "0.1";
  }
  const ModelLayout& layout() const override { return layout_; }
  const std::map<std::string, std::string>& attributes() const override {
    return attributes_;
  }
  int max_push_minibatches() const override { return max_push_minibatches_; }
  absl::Status Pull(absl::Span<float> params,
                    std::vector<uint64_t>* versions) override {
    absl::MutexLock lock(&mu_);
    if (fail_pulls_ > 0) {
      --fail_pulls_;
      log_.push_back("pull-failed");
      return absl::UnavailableError("server restarting");
    }
    std::copy(model_.begin(), model_.end(), params.begin());
    *versions = {version_};
    log_.push_back("pull");
    return absl::OkStatus();
  }
  absl::StatusOr<PushOutcome> Push(absl::Span<const float> g,
                                   const std::vector<uint64_t>& versions,
                                   int n, PushKind kind) override {
    if (push_delay_ > absl::ZeroDuration()) absl::SleepFor(push_delay_);  // a slow network
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
    minibatches_pushed_ += n;
    max_minibatches_seen_ = std::max(max_minibatches_seen_, n);
    ++pushes_;
    if (drop_every_ > 0 && pushes_ % drop_every_ == 0) {
      out.dropped = 1;
      out.pull_required = true;
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
  absl::StatusOr<PoolGrant> FetchBatches(uint64_t, int, double, int) override {
    return absl::UnimplementedError("no pool in the fake");
  }

  absl::Mutex mu_;
  ModelLayout layout_;
  std::map<std::string, std::string> attributes_;
  std::vector<float> model_ ABSL_GUARDED_BY(mu_);
  std::vector<float> assigned_ ABSL_GUARDED_BY(mu_);
  uint64_t version_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<std::string> log_ ABSL_GUARDED_BY(mu_);
  int64_t pushes_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t minibatches_pushed_ ABSL_GUARDED_BY(mu_) = 0;
  int max_minibatches_seen_ ABSL_GUARDED_BY(mu_) = 0;
  int max_push_minibatches_ = 0;
  int drop_every_ = 0;
  int fail_pulls_ ABSL_GUARDED_BY(mu_) = 0;
  int fail_pushes_ ABSL_GUARDED_BY(mu_) = 0;
  // Errors the next pushes get, in order.
  std::vector<absl::Status> push_errors_ ABSL_GUARDED_BY(mu_);
  absl::Duration push_delay_ = absl::ZeroDuration();
  float lr_;
};

TrainerOptions BaseOptions() {
  TrainerOptions o;
  o.batch_size = 16;
  o.epochs = 0;
  o.max_steps = 40;
  o.log_every = 0;
  return o;
}

absl::StatusOr<TrainResult> Train(ParamClient* client, const Data& data,
                                  const TrainerOptions& o, int part = 0,
                                  int parts = 1, std::ostream* log = nullptr) {
  FrameData train(data.info, data.utts, 1, part, parts);
  FrameData heldout(data.info, data.utts, 1);
  auto dnn = CreateCpuDnn(SmallSpec(), 64);
  if (!dnn.ok()) return dnn.status();
  Trainer trainer(client, dnn->get(), &train, &heldout, o, log);
  return trainer.Run();
}

TEST(TrainerTest, PushEveryKSendsOneKthAsManyPushes) {
  Data data;
  for (int k : {1, 4}) {
    FakePool pool;
    TrainerOptions o = BaseOptions();
    o.push_every = k;
    auto result = Train(&pool, data, o);
    ASSERT_TRUE(result.ok()) << result.status();
    EXPECT_EQ(result->steps, 40);
    EXPECT_EQ(result->pushes, 40 / k) << "k=" << k;
    absl::MutexLock lock(&pool.mu_);
    EXPECT_EQ(pool.pushes_, 40 / k);
    EXPECT_EQ(pool.minibatches_pushed_, 40);  // every gradient reached it
  }
}

TEST(TrainerTest, DroppedPushIsFollowedByAFreshPull) {
  Data data;
  FakePool pool;
  pool.drop_every_ = 3;
  auto result = Train(&pool, data, BaseOptions());
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

TEST(TrainerTest, ComputesMoreMinibatchesWhileAPushIsOnTheWire) {
  Data data;
  FakePool pool;
  pool.push_delay_ = absl::Milliseconds(20);
  TrainerOptions o = BaseOptions();
  o.compute_while_pushing = true;
  o.max_steps = 60;
  auto result = Train(&pool, data, o);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->steps, 60);
  EXPECT_LT(result->pushes, 30);  // minibatches went out together
  EXPECT_GE(result->pushes, 60 / 4);  // but never more than 4 in one push
  absl::MutexLock lock(&pool.mu_);
  EXPECT_EQ(pool.minibatches_pushed_, 60);  // and none was lost
  // The model is still refreshed after every completed push.
  const int64_t pulls = std::count(pool.log_.begin(), pool.log_.end(), "pull");
  EXPECT_GE(pulls, pool.pushes_);
}

TEST(TrainerTest, BackgroundPushesStillRefreshTheModelWhenComputeIsSlow) {
  // Pushes (1 ms) finish while the next minibatch is computed (several ms):
  // every completed push must be followed by a pull.
  Data data;
  FakePool pool;
  pool.push_delay_ = absl::Milliseconds(1);
  TrainerOptions o = BaseOptions();
  o.compute_while_pushing = true;
  o.slowdown = 100;  // a slow minibatch
  o.max_steps = 20;
  auto result = Train(&pool, data, o);
  ASSERT_TRUE(result.ok()) << result.status();
  absl::MutexLock lock(&pool.mu_);
  const int64_t pulls = std::count(pool.log_.begin(), pool.log_.end(), "pull");
  EXPECT_GE(pulls, pool.pushes_) << "pushes " << pool.pushes_;
  EXPECT_EQ(pool.minibatches_pushed_, 20);
}

class RetryCounter : public TrainerObserver {
 public:
  void OnStep(const StepReport&) override {}
  void OnPush(const PushOutcome&) override {}
  void OnHeldoutAccuracy(double) override {}
  void OnRpcRetry() override { ++retries; }
  int retries = 0;
};

TEST(TrainerTest, RetriesPullsAndPushesWhileTheServerIsAway) {
  Data data;
  FakePool pool;
  {
    absl::MutexLock lock(&pool.mu_);
    pool.fail_pulls_ = 3;
    pool.fail_pushes_ = 2;
  }
  RetryCounter counter;
  TrainerOptions o = BaseOptions();
  o.initial_backoff = absl::Milliseconds(1);
  o.max_backoff = absl::Milliseconds(4);
  o.observer = &counter;
  auto result = Train(&pool, data, o);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->steps, 40);
  EXPECT_EQ(counter.retries, 5);
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
  Data data;
  FakePool pool;
  {
    absl::MutexLock lock(&pool.mu_);
    pool.fail_pulls_ = 1000000;
  }
  TrainerOptions o = BaseOptions();
  o.initial_backoff = absl::Milliseconds(1);
  o.max_backoff = absl::Milliseconds(2);
  o.max_retry_time = absl::Milliseconds(50);
  auto result = Train(&pool, data, o);
  EXPECT_EQ(result.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(result.status().message().find("retries"), absl::string_view::npos);
}

// What the worker does after a failed push depends on the status code and
// the refusal only: an overloaded server (any refusal, whatever the text) is
// "busy": pull and go on at once; a plain UNAVAILABLE (even one saying
// "busy") and ABORTED are retried after a backoff; INVALID_ARGUMENT is
// final, even when its text says "from the future".
TEST(TrainerTest, RetryDecisionsFollowTheCodeAndTheRefusalNotTheText) {
  Data data;
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
  TrainerOptions o = BaseOptions();
  o.initial_backoff = absl::Milliseconds(1);
  o.max_backoff = absl::Milliseconds(2);
  o.observer = &counter;
  auto result = Train(&pool, data, o);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->pushes_busy, 3);
  EXPECT_EQ(counter.retries, 2);
  absl::MutexLock lock(&pool.mu_);
  EXPECT_EQ(pool.pushes_, 35);  // none of the 5 refused ones was resent
}

TEST(TrainerTest, InvalidArgumentIsFinalWhateverItsText) {
  Data data;
  FakePool pool;
  {
    absl::MutexLock lock(&pool.mu_);
    pool.push_errors_ = {absl::InvalidArgumentError(
        "push computed from version 9 (a version from the future)")};
  }
  TrainerOptions o = BaseOptions();
  o.initial_backoff = absl::Milliseconds(1);
  auto result = Train(&pool, data, o);
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
  Data data;
  auto waits_with_seed = [&](uint64_t seed) {
    FakePool pool;
    {
      absl::MutexLock lock(&pool.mu_);
      pool.fail_pulls_ = 8;
    }
    TrainerOptions o = BaseOptions();
    o.max_steps = 2;
    o.initial_backoff = absl::Milliseconds(1);
    o.max_backoff = absl::Milliseconds(8);
    o.jitter_seed = seed;
    std::ostringstream log;
    EXPECT_TRUE(Train(&pool, data, o, 0, 1, &log).ok());
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
  Data data;
  FakePool pool;
  pool.max_push_minibatches_ = 4;
  TrainerOptions o = BaseOptions();
  o.push_every = 5;
  EXPECT_EQ(Train(&pool, data, o).status().code(),
            absl::StatusCode::kInvalidArgument);
  // Computing while pushing never puts more than the limit into one push.
  pool.push_delay_ = absl::Milliseconds(20);
  o.push_every = 1;
  o.compute_while_pushing = true;
  o.max_minibatches_per_push = 8;
  auto result = Train(&pool, data, o);
  ASSERT_TRUE(result.ok()) << result.status();
  absl::MutexLock lock(&pool.mu_);
  EXPECT_LE(pool.max_minibatches_seen_, 4);
  EXPECT_EQ(pool.minibatches_pushed_, 40);
}

TEST(TrainerTest, ModelMustMatchTheCorpusClassesAndInputs) {
  corpus::CorpusInfo info;
  info.feature_dim = 4;
  info.num_classes = 3;
  DnnSpec spec = SmallSpec();  // 12 inputs = 3 frames x 4, 3 classes
  EXPECT_TRUE(CheckModelMatchesCorpus(spec, info, 1).ok());
  EXPECT_EQ(CheckModelMatchesCorpus(spec, info, 2).code(),
            absl::StatusCode::kFailedPrecondition);
  info.num_classes = 40;
  const absl::Status s = CheckModelMatchesCorpus(spec, info, 1);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(s.message().find("40 classes"), absl::string_view::npos) << s;
}

TEST(TrainerTest, SgdModeTrainsLocallyAndHandsTheModelOver) {
  Data data;
  FakePool pool;
  TrainerOptions o = BaseOptions();
  o.mode = TrainMode::kSgd;
  o.max_steps = 100;
  auto result = Train(&pool, data, o);
  ASSERT_TRUE(result.ok()) << result.status();
  absl::MutexLock lock(&pool.mu_);
  EXPECT_EQ(pool.pushes_, 0);
  EXPECT_EQ(std::count(pool.log_.begin(), pool.log_.end(), "assign"), 1);
  EXPECT_EQ(result->params, pool.assigned_);  // the final pull got it back
  EXPECT_NE(pool.assigned_, InitialDnnParams(SmallSpec(), 1));
  EXPECT_GT(result->heldout_accuracy, 0.6);  // it learned the toy task
}

TEST(TrainerTest, WarmStartHandsOverBeforeAnyAsynchronousPush) {
  Data data;
  FakePool pool;
  TrainerOptions o = BaseOptions();
  o.warm_start_epochs = 0.5;
  absl::StatusOr<TrainResult> results[2];
  std::thread other([&] {
    TrainerOptions o1 = o;
    o1.worker_index = 1;
    results[1] = Train(&pool, data, o1, 1, 2);
  });
  results[0] = Train(&pool, data, o, 0, 2);
  other.join();
  ASSERT_TRUE(results[0].ok()) << results[0].status();
  ASSERT_TRUE(results[1].ok()) << results[1].status();
  absl::MutexLock lock(&pool.mu_);
  auto assign = std::find(pool.log_.begin(), pool.log_.end(), "assign");
  ASSERT_NE(assign, pool.log_.end());
  EXPECT_EQ(std::find(pool.log_.begin(), assign, "push"), assign)
      << "a gradient was pushed before the warm-start model arrived";
  EXPECT_NE(pool.assigned_, InitialDnnParams(SmallSpec(), 1));
  EXPECT_EQ(pool.pushes_, 80);
}

// Real servers for the pool and for synchronous mode.
std::unique_ptr<GrpcServer> StartServer(int sync_workers) {
  ParamStoreOptions o;
  o.tensors = DnnTensors(SmallSpec());
  o.num_shards = 2;
  o.optimizer.learning_rate = 0.1f;
  o.sync_workers = sync_workers;
  o.attributes["activation"] = "relu";
  auto server =
      GrpcServer::Start(o, InitialDnnParams(SmallSpec(), 1), "127.0.0.1", 0);
  EXPECT_TRUE(server.ok()) << server.status();
  return server.ok() ? *std::move(server) : nullptr;
}

// Runs `n` workers concurrently against `server`, each with its own gRPC
// client; worker w trains on part w of n with options(w).
std::vector<absl::StatusOr<TrainResult>> RunWorkers(
    GrpcServer& server, const Data& data, int n,
    const std::function<TrainerOptions(int)>& options) {
  std::vector<absl::StatusOr<TrainResult>> results(
      n, absl::UnknownError("not run"));
  std::vector<std::thread> threads;
  for (int w = 0; w < n; ++w) {
    threads.emplace_back([&, w] {
      GrpcClientOptions co;
      co.worker_id = w;
      auto client = GrpcParamClient::Create({server.local_address()}, co);
      if (!client.ok()) {
        results[w] = client.status();
        return;
      }
      TrainerOptions o = options(w);
      o.worker_index = w;
      results[w] = Train(client->get(), data, o, o.use_pool ? 0 : w,
                         o.use_pool ? 1 : n);
    });
  }
  for (auto& t : threads) t.join();
  return results;
}

TEST(TrainerTest, SharedPoolGivesASlowWorkerFewerBatches) {
  Data data;
  auto server = StartServer(0);
  ASSERT_NE(server, nullptr);
  auto results = RunWorkers(*server, data, 2, [](int w) {
    TrainerOptions o = BaseOptions();
    o.max_steps = 0;
    o.epochs = 3;
    o.use_pool = true;
    o.slowdown = w == 1 ? 4.0 : 1.0;
    return o;
  });
  ASSERT_TRUE(results[0].ok()) << results[0].status();
  ASSERT_TRUE(results[1].ok()) << results[1].status();
  const uint64_t fast = server->pool()->TakenBy(0);
  const uint64_t slow = server->pool()->TakenBy(1);
  EXPECT_EQ(fast + slow, 3u * (1000 / 16));  // every batch of 3 epochs once
  EXPECT_LT(slow, fast) << "slow " << slow << " fast " << fast;
  EXPECT_EQ(results[0]->steps, static_cast<int64_t>(fast));
  EXPECT_EQ(results[1]->steps, static_cast<int64_t>(slow));
}

TEST(TrainerTest, SyncModeAppliesOneAveragedUpdatePerStep) {
  Data data;
  auto server = StartServer(2);
  ASSERT_NE(server, nullptr);
  auto results = RunWorkers(*server, data, 2, [](int) {
    TrainerOptions o = BaseOptions();
    o.mode = TrainMode::kSync;
    o.max_steps = 25;
    return o;
  });
  for (auto& r : results) {
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->pushes, 25);
    EXPECT_EQ(r->pushes_dropped, 0);
  }
  EXPECT_EQ(server->store()->version(), 25u);
  EXPECT_EQ(server->store()->stats().pushes_applied, 25u);
}

}  // namespace
}  // namespace asgd

namespace asgd {
namespace {

// The server's refusal reaches the worker as a code and a Refusal, through
// the real client: a push refused because this address has its pushes in
// flight is "busy", whatever the message says.
TEST(GrpcParamClientTest, TheServersRefusalArrivesAsARefusal) {
  ParamStoreOptions o;
  o.tensors = DnnTensors(SmallSpec());
  o.num_shards = 1;
  o.attributes["activation"] = "relu";
  GrpcServiceOptions service;
  service.max_pushes_per_peer = 1;
  auto server =
      GrpcServer::Start(o, InitialDnnParams(SmallSpec(), 1), "127.0.0.1", 0,
                        nullptr, {}, nullptr, service);
  ASSERT_TRUE(server.ok()) << server.status();
  // Another stream from this address holds the only slot.
  auto stub = asgd::v1::ParameterServer::NewStub(grpc::CreateChannel(
      (*server)->local_address(), grpc::InsecureChannelCredentials()));
  grpc::ClientContext ctx;
  asgd::v1::PushReply reply;
  auto holder = stub->Push(&ctx, &reply);
  asgd::v1::PushChunk header;
  header.mutable_header()->set_num_minibatches(1);
  ASSERT_TRUE(holder->Write(header));
  auto client = GrpcParamClient::Create({(*server)->local_address()}, {});
  ASSERT_TRUE(client.ok()) << client.status();
  EXPECT_EQ((*client)->max_push_minibatches(), 64);
  std::vector<float> params((*client)->layout().total_size());
  std::vector<uint64_t> versions;
  ASSERT_TRUE((*client)->Pull(absl::MakeSpan(params), &versions).ok());
  // Wait (bounded) until the server has admitted the holder's stream.
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while ((*server)->service()->pushes_in_flight() < 1 &&
         absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(5));  // polling a condition, bounded
  }
  ASSERT_EQ((*server)->service()->pushes_in_flight(), 1);
  const absl::StatusOr<PushOutcome> pushed =
      (*client)->Push(std::vector<float>(params.size(), 0.1f), versions, 1);
  ASSERT_FALSE(pushed.ok());
  EXPECT_EQ(pushed.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(RefusalOf(pushed.status()), Refusal::kPeerLimit) << pushed.status();
  ctx.TryCancel();
  holder->Finish();
}

}  // namespace
}  // namespace asgd
