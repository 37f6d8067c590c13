// The trainer's controls that need a real server: the shared minibatch pool
// (a slow worker takes fewer batches, every batch is used once; a client
// without the run id can neither take the workers' batches nor keep them
// out of the pool) and the synchronous baseline (one averaged update per
// step), with workers in one process over gRPC (127.0.0.1, port 0). Speed is a seam: the straggler
// idles, through its clock, until the other worker is three batches ahead,
// so which worker is slower does not depend on the machine.
#include <algorithm>
#include <functional>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "proto/asgd.grpc.pb.h"
#include "model/cpu_backend.h"
#include "server/grpc_server.h"
#include "server/model_options.h"
#include "worker/data/make_examples.h"
#include "worker/data/toy_task.h"
#include "worker/data/utterances.h"
#include "worker/loop/fake_clock.h"
#include "worker/ps/connect.h"
#include "worker/ps/trainer.h"

namespace asgd {
namespace {

std::unique_ptr<GrpcServer> StartServer(int sync_workers,
                                        const ModelSpec& spec) {
  ParamStoreOptions o;
  SetModel(spec, &o);
  o.num_shards = 2;
  o.optimizer.learning_rate = 0.1f;
  o.sync_workers = sync_workers;
  auto server =
      GrpcServer::Start(o, InitialParams(spec, 1), "127.0.0.1", 0);
  EXPECT_TRUE(server.ok()) << server.status();
  return server.ok() ? *std::move(server) : nullptr;
}

// Runs `n` workers concurrently against `server`, each with its own gRPC
// client; worker w trains on part w of n (all data with the pool).
// `done(w)`, when given, is called as worker w finishes.
std::vector<absl::StatusOr<TrainResult>> RunWorkers(
    GrpcServer& server, int n,
    const std::function<TrainerOptions(int)>& options,
    const std::function<void(int)>& done = nullptr) {
  std::vector<absl::StatusOr<TrainResult>> results(
      n, absl::UnknownError("not run"));
  std::vector<std::thread> threads;
  for (int w = 0; w < n; ++w) {
    threads.emplace_back([&, w] {
      PoolClientOptions co;
      co.worker_id = w;
      auto client = ConnectToPool({server.local_address()}, co);
      if (!client.ok()) {
        results[w] = client.status();
        return;
      }
      TrainerOptions o = options(w);
      o.loop.worker_index = w;
      const ModelSpec& spec = (*client)->model();
      const Utterances train_utts =
          ToyUtterances(1, o.use_pool ? 0 : w, o.use_pool ? 1 : n);
      const Utterances heldout_utts = ToyUtterances(1);
      auto train = MakeExamples(spec, &train_utts, ToyDataOptions());
      auto heldout = MakeExamples(spec, &heldout_utts, ToyDataOptions());
      if (!train.ok() || !heldout.ok()) {
        results[w] = train.ok() ? heldout.status() : train.status();
        return;
      }
      auto backend = CreateCpuBackend(
          spec, ShapeOfBatch(**train, o.loop.batch_size).rows());
      Trainer trainer(client->get(), backend->get(), train->get(),
                      heldout->get(), o, nullptr);
      results[w] = trainer.Run();
      if (done) done(w);
    });
  }
  for (auto& t : threads) t.join();
  return results;
}

constexpr char kRunId[] = "trainer-pool-test-run-0123456789";

TrainerOptions BaseOptions() {
  TrainerOptions o;
  o.loop.batch_size = 16;
  o.loop.log_every = 0;
  o.pool_run_id = kRunId;  // used with use_pool only
  return o;
}

// A client of the pool that is not one of the workers: plain FetchBatches
// calls with the run id it chooses.
class OtherClient {
 public:
  explicit OtherClient(const GrpcServer& server)
      : stub_(asgd::v1::ParameterServer::NewStub(grpc::CreateChannel(
            server.local_address(), grpc::InsecureChannelCredentials()))) {}

  grpc::Status Fetch(const std::string& run_id, uint64_t frames,
                     uint32_t batch, double epochs, uint32_t count,
                     asgd::v1::FetchBatchesReply* reply) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() +
                     std::chrono::seconds(30));
    ctx.set_wait_for_ready(true);
    asgd::v1::FetchBatchesRequest r;
    r.set_worker_id(0);  // the fast worker's id, too
    r.set_run_id(run_id);
    r.set_num_frames(frames);
    r.set_batch_size(batch);
    r.set_epochs(epochs);
    r.set_count(count);
    return stub_->FetchBatches(&ctx, r, reply);
  }

 private:
  std::unique_ptr<asgd::v1::ParameterServer::Stub> stub_;
};

// Worker 0's progress, and a straggler clock for worker 1 that idles until
// worker 0 is three batches ahead of it (or done).
class Race {
 public:
  class Fast : public TrainerObserver {
   public:
    explicit Fast(Race* race) : race_(race) {}
    void OnStep(const StepReport&) override {
      absl::MutexLock lock(&race_->mu_);
      ++race_->fast_steps_;
    }
    void OnPush(const PushReport&) override {}
    void OnHeldoutAccuracy(double) override {}

   private:
    Race* const race_;
  };

  class SlowClock : public Clock {
   public:
    explicit SlowClock(Race* race) : race_(race) {}
    absl::Time Now() override { return clock_.Now(); }
    void SleepFor(absl::Duration d) override {
      absl::MutexLock lock(&race_->mu_);
      const int64_t mine = ++race_->slow_steps_;
      std::pair<Race*, int64_t> arg(race_, mine);
      race_->mu_.Await(absl::Condition(
          +[](std::pair<Race*, int64_t>* a) ABSL_EXCLUSIVE_LOCKS_REQUIRED(
               a->first->mu_) {
            return a->first->fast_done_ ||
                   a->first->fast_steps_ >= 3 * a->second;
          },
          &arg));
      clock_.SleepFor(d);
    }

   private:
    Race* const race_;
    FakeClock clock_;
  };

  void FastDone() {
    absl::MutexLock lock(&mu_);
    fast_done_ = true;
  }

 private:
  absl::Mutex mu_;
  int64_t fast_steps_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t slow_steps_ ABSL_GUARDED_BY(mu_) = 0;
  bool fast_done_ ABSL_GUARDED_BY(mu_) = false;
};

TEST(TrainerPoolTest, SharedPoolGivesASlowWorkerFewerBatches) {
  auto server = StartServer(0, ToyModel("dnn"));
  ASSERT_NE(server, nullptr);
  Race race;
  Race::Fast fast(&race);
  Race::SlowClock slow_clock(&race);
  auto results = RunWorkers(*server, 2, [&](int w) {
    TrainerOptions o = BaseOptions();
    o.loop.epochs = 3;
    o.use_pool = true;
    if (w == 0) {
      o.loop.observer = &fast;
    } else {
      o.loop.slowdown = 2;  // idles through the race's clock
      o.loop.clock = &slow_clock;
    }
    return o;
  }, [&](int w) {
    if (w == 0) race.FastDone();
  });
  ASSERT_TRUE(results[0].ok()) << results[0].status();
  ASSERT_TRUE(results[1].ok()) << results[1].status();
  const uint64_t fast_batches = server->pool()->TakenBy(0);
  const uint64_t slow_batches = server->pool()->TakenBy(1);
  EXPECT_EQ(fast_batches + slow_batches, 3u * (1000 / 16));  // each once
  EXPECT_LT(slow_batches, fast_batches)
      << "slow " << slow_batches << " fast " << fast_batches;
  EXPECT_EQ(results[0]->steps, static_cast<int64_t>(fast_batches));
  EXPECT_EQ(results[1]->steps, static_cast<int64_t>(slow_batches));
}

// A client that names the workers' dataset (1000 frames, batches of 16, 3
// epochs) without their run id drains only a dataset of its own; one with no
// run id is refused. The workers then get every batch of theirs.
TEST(TrainerPoolTest, AClientWithoutTheRunIdCannotTakeTheWorkersBatches) {
  auto server = StartServer(0, ToyModel("dnn"));
  ASSERT_NE(server, nullptr);
  OtherClient other(*server);
  asgd::v1::FetchBatchesReply reply;
  grpc::Status s = other.Fetch("", 1000, 16, 3, 1024, &reply);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_TRUE(absl::StrContains(s.error_message(), "run id")) << s.error_message();
  uint64_t drained = 0;
  do {
    s = other.Fetch("guessed-run-id-0000000000000000", 1000, 16, 3, 1024,
                    &reply);
    ASSERT_TRUE(s.ok()) << s.error_message();
    drained += reply.batch_ids_size();
  } while (!reply.exhausted());
  EXPECT_EQ(drained, 3u * (1000 / 16));
  auto results = RunWorkers(*server, 2, [](int) {
    TrainerOptions o = BaseOptions();
    o.loop.epochs = 3;
    o.use_pool = true;
    return o;
  });
  ASSERT_TRUE(results[0].ok()) << results[0].status();
  ASSERT_TRUE(results[1].ok()) << results[1].status();
  EXPECT_EQ(results[0]->steps + results[1]->steps, 3 * (1000 / 16));
}

// The per-address bound through gRPC: made-up datasets from one address
// (PeerAddress of the call) stop at BatchPoolOptions::max_datasets_per_client
// with RESOURCE_EXHAUSTED naming the address, and the datasets it holds go
// on being served.
TEST(TrainerPoolTest, OneAddressGetsOnlyItsShareOfThePool) {
  auto server = StartServer(0, ToyModel("dnn"));
  ASSERT_NE(server, nullptr);
  OtherClient other(*server);
  asgd::v1::FetchBatchesReply reply;
  int granted = 0;
  for (int i = 0; i < 100; ++i) {
    const grpc::Status s =
        other.Fetch(absl::StrCat("made-up-run-id-", 1000 + i), 1000, 16, 1, 1,
                    &reply);
    if (s.ok()) {
      ++granted;
    } else {
      EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
      EXPECT_TRUE(absl::StrContains(s.error_message(), "ipv4:127.0.0.1"))
          << s.error_message();
    }
  }
  EXPECT_EQ(granted, BatchPoolOptions().max_datasets_per_client);
  EXPECT_EQ(server->pool()->datasets(), granted);
  const grpc::Status s = other.Fetch("made-up-run-id-1000", 1000, 16, 1, 1, &reply);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(reply.batch_ids(0), 1u);
}

TEST(TrainerPoolTest, SyncModeAppliesOneAveragedUpdatePerStep) {
  auto server = StartServer(2, ToyModel("dnn"));
  ASSERT_NE(server, nullptr);
  auto results = RunWorkers(*server, 2, [](int) {
    TrainerOptions o = BaseOptions();
    o.mode = TrainMode::kSync;
    o.loop.epochs = 0;
    o.loop.max_steps = 25;
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

// The pool and the synchronous baseline train every model kind (the pool
// hands out chunks for the recurrent ones).
class EveryModelKindTest : public ::testing::TestWithParam<std::string> {};

TEST_P(EveryModelKindTest, SharedPoolAndSyncModeLearnTheToyTask) {
  for (const bool sync : {false, true}) {
    auto server = StartServer(sync ? 2 : 0, ToyModel(GetParam()));
    ASSERT_NE(server, nullptr);
    auto results = RunWorkers(*server, 2, [&](int) {
      TrainerOptions o = BaseOptions();
      o.loop.batch_size = 20;
      if (sync) {
        o.mode = TrainMode::kSync;
        o.loop.epochs = 0;
        o.loop.max_steps = 60;
      } else {
        o.use_pool = true;
        o.loop.epochs = 3;
      }
      return o;
    });
    for (auto& r : results) {
      ASSERT_TRUE(r.ok()) << r.status();
      EXPECT_GT(r->heldout_accuracy, 0.8) << GetParam() << " sync " << sync;
    }
    if (!sync) {
      // Every batch of every epoch once, among the two workers.
      EXPECT_EQ(server->pool()->TakenBy(0) + server->pool()->TakenBy(1),
                static_cast<uint64_t>(results[0]->steps + results[1]->steps));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Kinds, EveryModelKindTest,
                         ::testing::Values("dnn", "cnn", "lstm", "blstm"));

}  // namespace
}  // namespace asgd
