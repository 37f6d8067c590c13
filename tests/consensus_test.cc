// Consensus training (worker/consensus/) against real servers over gRPC
// (127.0.0.1, port 0): one worker's EASGD and ADMM runs equal a reference
// written out here step by step (the servers' model and the worker's own,
// bit for bit); a worker restarted in an ADMM slot takes its dual from the
// servers' slot and leaves the consensus the slots' average; a push too
// stale is dropped on both ends of the spring; workers together train the
// toy task; a synchronous pool, a pool without ADMM slots (or EASGD on one
// with them) and bad options are refused clearly.
#include <memory>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "model/cpu_backend.h"
#include "model/staging_spy.h"
#include "server/grpc_server.h"
#include "server/model_options.h"
#include "tests/test_pool.h"
#include "worker/consensus/consensus_trainer.h"
#include "worker/data/batch_source.h"
#include "worker/data/make_examples.h"
#include "worker/data/toy_task.h"
#include "worker/ps/connect.h"

namespace asgd {
namespace {

constexpr float kLearningRate = 0.1f;

// One worker's data, backend and client of `pool`.
struct Worker {
  std::unique_ptr<ParamClient> client;
  std::unique_ptr<ExampleSet> train, heldout;
  std::unique_ptr<ModelBackend> backend;
  Utterances train_utts = ToyUtterances(1);
  Utterances heldout_utts = ToyUtterances(2);
};

std::unique_ptr<Worker> MakeWorker(const TestPool& pool, int index,
                                   int num_workers, int batch_size) {
  auto w = std::make_unique<Worker>();
  w->train_utts = ToyUtterances(1, index, num_workers);
  PoolClientOptions co;
  co.worker_id = index;
  auto client = ConnectToPool(pool.addresses, co);
  EXPECT_TRUE(client.ok()) << client.status();
  if (!client.ok()) return nullptr;
  w->client = *std::move(client);
  const ModelSpec& spec = w->client->model();
  auto train = MakeExamples(spec, &w->train_utts, ToyDataOptions());
  auto heldout = MakeExamples(spec, &w->heldout_utts, ToyDataOptions());
  EXPECT_TRUE(train.ok() && heldout.ok());
  w->train = *std::move(train);
  w->heldout = *std::move(heldout);
  auto backend = CreateCpuBackend(
      spec, ShapeOfBatch(*w->train, batch_size).rows());
  EXPECT_TRUE(backend.ok());
  w->backend = *std::move(backend);
  return w;
}

ConsensusOptions Options(ConsensusRule rule, int index) {
  ConsensusOptions o;
  o.rule = rule;
  o.loop.worker_index = index;
  o.loop.batch_size = 16;
  o.loop.log_every = 0;
  o.loop.epochs = 0;
  o.learning_rate = kLearningRate;
  return o;
}

// Runs one ConsensusTrainer for `w` (through `client`, default w's own).
absl::StatusOr<ConsensusResult> Train(Worker& w, const ConsensusOptions& o,
                                      ParamClient* client = nullptr) {
  ConsensusTrainer trainer(client != nullptr ? client : w.client.get(),
                           w.backend.get(), w.train.get(), w.heldout.get(), o,
                           nullptr);
  return trainer.Run();
}

// The minibatches the trainer draws: a LocalSource with its seed.
class Batches {
 public:
  Batches(const ExampleSet* train, const ConsensusOptions& o)
      : source_(train, o.loop.seed * 7919 + o.loop.worker_index, 0),
        batch_(ShapeOfBatch(*train, o.loop.batch_size).examples,
               ShapeOfBatch(*train, o.loop.batch_size).steps,
               train->input_dim(), train->labels_per_row()) {}
  // The gradient of the next minibatch at x.
  std::vector<float> Gradient(ModelBackend* backend,
                              const std::vector<float>& x) {
    EXPECT_TRUE(*source_.Next(&batch_));
    std::vector<float> g(x.size());
    EXPECT_TRUE(backend->ComputeGradient(x, batch_.view(), absl::MakeSpan(g))
                    .ok());
    return g;
  }

 private:
  LocalSource source_;
  BatchBuffer batch_;
};

// Also with a backend that stages minibatches (as the CUDA backend does):
// each one after the first is handed to it a step ahead, and the result is
// the same.
TEST(ConsensusTest, EasgdOneWorkerEqualsTheReference) {
  for (bool staging : {false, true}) {
    SCOPED_TRACE(staging ? "staging backend" : "CPU backend");
    const ModelSpec spec = ToyModel("dnn");
    auto pool = StartTestPool(spec, 2, 2, kLearningRate);
    ASSERT_TRUE(pool.ok()) << pool.status();
    auto worker = MakeWorker(*pool, 0, 1, 16);
    ASSERT_NE(worker, nullptr);
    StagingSpy* spy;
    worker->backend = MaybeStaging(std::move(worker->backend), staging, &spy);
    ConsensusOptions o = Options(ConsensusRule::kEasgd, 0);
    o.every = 3;
    o.alpha = 0.375f;
    o.loop.max_steps = 7;  // two rounds of 3, then a last one of 1
    const std::vector<float> z0 = PoolModel(pool->servers);

    auto result = Train(*worker, o);
    ASSERT_TRUE(result.ok()) << result.status();
    EXPECT_EQ(result->train.steps, 7);
    EXPECT_EQ(result->rounds, 3);
    EXPECT_EQ(result->train.pushes, 3);
    EXPECT_EQ(result->parts_dropped, 0);

    // The reference: local SGD; every 3 steps and at the end the elastic
    // difference moves the servers' model by +e and the worker's by -e.
    auto backend = CreateCpuBackend(spec, worker->backend->max_rows());
    ASSERT_TRUE(backend.ok());
    Batches batches(worker->train.get(), o);
    std::vector<float> x = z0, z = z0;
    for (int step = 1; step <= 7; ++step) {
      const std::vector<float> g = batches.Gradient(backend->get(), x);
      for (size_t i = 0; i < x.size(); ++i) x[i] -= kLearningRate * g[i];
      if (step % 3 == 0 || step == 7) {
        for (size_t i = 0; i < x.size(); ++i) {
          const float e = 0.375f * (x[i] - z[i]);
          z[i] += e;
          x[i] -= e;
        }
      }
    }
    EXPECT_NE(z, z0);
    EXPECT_EQ(PoolModel(pool->servers), z);
    EXPECT_EQ(result->train.params, z);
    EXPECT_EQ(result->local, x);
    if (spy != nullptr) {
      EXPECT_EQ(spy->calls, 7);
      EXPECT_EQ(spy->staged_calls, 6);
      EXPECT_EQ(spy->changed_since_announced, 0);
    }
  }
}

// The reference of one ADMM worker: starting at x = z with lam = rho (slot
// - z), `steps` steps on g + lam + rho (x - z); every `every` steps and at
// the end the servers replace the slot's point with u = x + lam / rho in
// the average of `slots` slots (step/admm_apply.h: z += (u - s) / slots,
// s = u), the worker pulls z and lam += rho (x - z). Returns
// the worker's x; updates z and the slot.
std::vector<float> AdmmReference(const ModelSpec& spec, Worker& worker,
                                 const ConsensusOptions& o, int slots,
                                 std::vector<float>& z,
                                 std::vector<float>& slot) {
  auto backend = CreateCpuBackend(spec, worker.backend->max_rows());
  EXPECT_TRUE(backend.ok());
  Batches batches(worker.train.get(), o);
  const size_t n = z.size();
  const float rho = o.rho;
  std::vector<float> x = z, lam(n);
  for (size_t i = 0; i < n; ++i) lam[i] = rho * (slot[i] - x[i]);
  for (int step = 1; step <= o.loop.max_steps; ++step) {
    const std::vector<float> g = batches.Gradient(backend->get(), x);
    for (size_t i = 0; i < n; ++i) {
      const float augmented = g[i] + (lam[i] + rho * (x[i] - z[i]));
      x[i] -= kLearningRate * augmented;
    }
    if (step % o.every == 0 || step == o.loop.max_steps) {
      for (size_t i = 0; i < n; ++i) {
        const float u = x[i] + lam[i] / rho;
        const float d = 1.0f * (u - slot[i]);
        z[i] = z[i] + d / static_cast<float>(slots);
        slot[i] = u;
        lam[i] += rho * (x[i] - z[i]);
      }
    }
  }
  return x;
}

// The servers' ADMM slot `slot`, whole (layout order).
std::vector<float> PoolSlot(ParamClient* client, int slot) {
  std::vector<float> values(client->layout().total_size());
  EXPECT_TRUE(client->PullAdmmSlot(slot, absl::MakeSpan(values)).ok());
  return values;
}

TEST(ConsensusTest, AdmmOneWorkerEqualsTheReference) {
  const ModelSpec spec = ToyModel("dnn");
  auto pool = StartTestPool(spec, 2, 2, kLearningRate, /*admm_slots=*/1);
  ASSERT_TRUE(pool.ok()) << pool.status();
  auto worker = MakeWorker(*pool, 0, 1, 16);
  ASSERT_NE(worker, nullptr);
  ConsensusOptions o = Options(ConsensusRule::kAdmm, 0);
  o.every = 2;
  o.rho = 0.5f;
  o.loop.max_steps = 5;
  const std::vector<float> z0 = PoolModel(pool->servers);
  EXPECT_EQ(PoolSlot(worker->client.get(), 0), z0);  // a fresh slot

  auto result = Train(*worker, o);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->rounds, 3);
  EXPECT_EQ(result->slot_distance, 0.0);

  std::vector<float> z = z0, slot = z0;
  const std::vector<float> x = AdmmReference(spec, *worker, o, 1, z, slot);
  EXPECT_NE(z, z0);
  EXPECT_EQ(PoolModel(pool->servers), z);
  EXPECT_EQ(PoolSlot(worker->client.get(), 0), slot);
  EXPECT_EQ(result->train.params, z);
  EXPECT_EQ(result->local, x);
}

// Two workers in two slots; then worker 0 "dies" and a new worker 0 takes
// its slot over: it starts with the dual of the slot's point, and the
// consensus stays the average of the two slots.
TEST(ConsensusTest, ARestartedAdmmWorkerTakesItsDualFromTheServers) {
  const ModelSpec spec = ToyModel("dnn");
  auto pool = StartTestPool(spec, 2, 2, kLearningRate, /*admm_slots=*/2);
  ASSERT_TRUE(pool.ok()) << pool.status();
  for (int w = 0; w < 2; ++w) {
    auto worker = MakeWorker(*pool, w, 2, 16);
    ASSERT_NE(worker, nullptr);
    ConsensusOptions o = Options(ConsensusRule::kAdmm, w);
    o.every = 2;
    o.rho = 0.5f;
    o.loop.max_steps = 4;
    auto result = Train(*worker, o);
    ASSERT_TRUE(result.ok()) << result.status();
  }
  auto restarted = MakeWorker(*pool, 0, 2, 16);
  ASSERT_NE(restarted, nullptr);
  std::vector<float> z = PoolModel(pool->servers);
  std::vector<float> slot0 = PoolSlot(restarted->client.get(), 0);
  const std::vector<float> slot1 = PoolSlot(restarted->client.get(), 1);
  ASSERT_NE(slot0, z);  // the dead worker's point is still in the average
  for (size_t i = 0; i < z.size(); ++i) {
    ASSERT_NEAR(z[i], (slot0[i] + slot1[i]) / 2, 1e-5) << i;
  }

  ConsensusOptions o = Options(ConsensusRule::kAdmm, 0);
  o.every = 2;
  o.rho = 0.5f;
  o.loop.max_steps = 3;
  o.loop.seed = 2;  // other minibatches than its predecessor's
  auto result = Train(*restarted, o);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_GT(result->slot_distance, 0.0);

  const std::vector<float> x = AdmmReference(spec, *restarted, o, 2, z, slot0);
  EXPECT_EQ(PoolModel(pool->servers), z);
  EXPECT_EQ(PoolSlot(restarted->client.get(), 0), slot0);
  EXPECT_EQ(PoolSlot(restarted->client.get(), 1), slot1);
  EXPECT_EQ(result->local, x);
  for (size_t i = 0; i < z.size(); ++i) {
    EXPECT_NEAR(z[i], (slot0[i] + slot1[i]) / 2, 1e-5) << i;
  }
}

TEST(ConsensusTest, AdmmNeedsSlotsAndASlotPoolTakesNoEasgd) {
  const ModelSpec spec = ToyModel("dnn");
  for (bool slots : {false, true}) {
    SCOPED_TRACE(slots ? "EASGD on a pool with ADMM slots"
                       : "ADMM on a pool without slots");
    auto pool = StartTestPool(spec, 2, 1, kLearningRate, slots ? 2 : 0);
    ASSERT_TRUE(pool.ok()) << pool.status();
    auto worker = MakeWorker(*pool, 0, 1, 16);
    ASSERT_NE(worker, nullptr);
    ConsensusOptions o =
        Options(slots ? ConsensusRule::kEasgd : ConsensusRule::kAdmm, 0);
    o.every = 1;
    o.loop.max_steps = 2;
    const std::vector<float> z0 = PoolModel(pool->servers);
    auto result = Train(*worker, o);
    ASSERT_FALSE(result.ok());
    EXPECT_EQ(result.status().code(),
              slots ? absl::StatusCode::kFailedPrecondition
                    : absl::StatusCode::kInvalidArgument)
        << result.status();
    EXPECT_EQ(PoolModel(pool->servers), z0);
  }
}

// Makes every push stale: before forwarding one, another client pushes
// `extra` gradients of zeros to each server, so the servers move on.
class StalePushes final : public ParamClient {
 public:
  StalePushes(ParamClient* inner, ParamClient* other, int extra)
      : inner_(inner), other_(other), extra_(extra) {}
  const ModelLayout& layout() const override { return inner_->layout(); }
  const ModelSpec& model() const override { return inner_->model(); }
  const std::map<std::string, std::string>& attributes() const override {
    return inner_->attributes();
  }
  absl::Status Pull(PullSink* sink, std::vector<uint64_t>* v) override {
    return inner_->Pull(sink, v);
  }
  std::vector<absl::StatusOr<ServerPushReply>> PushEncoded(
      const std::vector<ServerPush>& parts, const std::vector<uint64_t>& v,
      int n) override {
    const std::vector<float> zeros(layout().total_size(), 0.0f);
    for (int i = 0; i < extra_; ++i) {
      auto now = other_->Versions();
      EXPECT_TRUE(now.ok());
      EXPECT_TRUE(other_->Push(zeros, *now, 1).ok());
    }
    return inner_->PushEncoded(parts, v, n);
  }
  absl::StatusOr<PushOutcome> Push(absl::Span<const float> g,
                                   const std::vector<uint64_t>& v, int n,
                                   PushKind kind) override {
    return inner_->Push(g, v, n, kind);
  }
  const PushEncoder* push_encoder() const override {
    return inner_->push_encoder();
  }
  absl::StatusOr<std::vector<uint64_t>> Versions() override {
    return inner_->Versions();
  }
  absl::StatusOr<PoolGrant> FetchBatches(const std::string& run_id,
                                         uint64_t frames, int batch,
                                         double epochs, int count) override {
    return inner_->FetchBatches(run_id, frames, batch, epochs, count);
  }

 private:
  ParamClient* const inner_;
  ParamClient* const other_;
  const int extra_;
};

TEST(ConsensusTest, AStalePushIsDroppedOnBothEndsOfTheSpring) {
  const ModelSpec spec = ToyModel("dnn");
  TestPool pool;
  for (int s = 0; s < 2; ++s) {
    ParamStoreOptions so;
    SetModel(spec, &so);
    so.server_index = s;
    so.num_servers = 2;
    so.max_staleness = 1;
    so.attributes["learning_rate"] = "0.1";
    auto server = GrpcServer::Start(so, InitialParams(spec, 1), "127.0.0.1", 0);
    ASSERT_TRUE(server.ok()) << server.status();
    pool.addresses.push_back((*server)->local_address());
    pool.servers.push_back(*std::move(server));
  }
  auto worker = MakeWorker(pool, 0, 1, 16);
  ASSERT_NE(worker, nullptr);
  PoolClientOptions co;
  co.worker_id = 9;
  auto other = ConnectToPool(pool.addresses, co);
  ASSERT_TRUE(other.ok());
  StalePushes stale(worker->client.get(), other->get(), 2);
  ConsensusOptions o = Options(ConsensusRule::kEasgd, 0);
  o.every = 2;
  o.loop.max_steps = 2;
  const std::vector<float> z0 = PoolModel(pool.servers);

  auto result = Train(*worker, o, &stale);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->rounds, 1);
  EXPECT_EQ(result->parts_dropped, 2);  // both servers' parts
  EXPECT_EQ(result->train.pushes_dropped, 2);
  // Neither end moved: the servers saw only the zero gradients, and the
  // worker's model is its two local SGD steps from z0.
  EXPECT_EQ(PoolModel(pool.servers), z0);
  auto backend = CreateCpuBackend(spec, worker->backend->max_rows());
  ASSERT_TRUE(backend.ok());
  Batches batches(worker->train.get(), o);
  std::vector<float> x = z0;
  for (int step = 0; step < 2; ++step) {
    const std::vector<float> g = batches.Gradient(backend->get(), x);
    for (size_t i = 0; i < x.size(); ++i) x[i] -= kLearningRate * g[i];
  }
  EXPECT_EQ(result->local, x);
}

struct RuleAndModel {
  ConsensusRule rule;
  const char* model;
};

class ConsensusTrainsTest : public ::testing::TestWithParam<RuleAndModel> {};

TEST_P(ConsensusTrainsTest, TwoWorkersTrainTheToyTask) {
  const ModelSpec spec = ToyModel(GetParam().model);
  const bool admm = GetParam().rule == ConsensusRule::kAdmm;
  auto pool = StartTestPool(spec, 2, 2, kLearningRate, admm ? 2 : 0);
  ASSERT_TRUE(pool.ok()) << pool.status();
  std::vector<std::unique_ptr<Worker>> workers;
  for (int w = 0; w < 2; ++w) {
    workers.push_back(MakeWorker(*pool, w, 2, 16));
    ASSERT_NE(workers.back(), nullptr);
  }
  const int examples = ShapeOfBatch(*workers[0]->heldout, 16).examples;
  auto before = EvaluateAccuracy(workers[0]->backend.get(),
                                 PoolModel(pool->servers),
                                 *workers[0]->heldout, examples);
  ASSERT_TRUE(before.ok()) << before.status();
  std::vector<absl::StatusOr<ConsensusResult>> results(
      2, absl::UnknownError("not run"));
  std::vector<std::thread> threads;
  for (int w = 0; w < 2; ++w) {
    threads.emplace_back([&, w] {
      ConsensusOptions o = Options(GetParam().rule, w);
      o.loop.epochs = 30;
      o.every = 4;
      o.alpha = 0.45f;
      o.rho = 0.5f;
      results[w] = Train(*workers[w], o);
    });
  }
  for (auto& t : threads) t.join();
  for (int w = 0; w < 2; ++w) {
    ASSERT_TRUE(results[w].ok()) << results[w].status();
    EXPECT_GT(results[w]->rounds, 10);
    EXPECT_GE(results[w]->last_distance, 0);
  }
  auto after = EvaluateAccuracy(workers[0]->backend.get(),
                                PoolModel(pool->servers), *workers[0]->heldout,
                                examples);
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_GT(*after, 0.9) << "before " << *before;
  EXPECT_LT(*before, 0.6);
}

INSTANTIATE_TEST_SUITE_P(
    Rules, ConsensusTrainsTest,
    ::testing::Values(RuleAndModel{ConsensusRule::kEasgd, "dnn"},
                      RuleAndModel{ConsensusRule::kAdmm, "dnn"},
                      RuleAndModel{ConsensusRule::kEasgd, "lstm"},
                      RuleAndModel{ConsensusRule::kAdmm, "cnn"}),
    [](const auto& info) {
      return ConsensusModeName(info.param.rule) + "_" + info.param.model;
    });

TEST(ConsensusTest, ASynchronousPoolRefusesAddPushesAndTheRunEnds) {
  const ModelSpec spec = ToyModel("dnn");
  ParamStoreOptions so;
  SetModel(spec, &so);
  so.sync_workers = 2;
  so.attributes["learning_rate"] = "0.1";
  auto server = GrpcServer::Start(so, InitialParams(spec, 1), "127.0.0.1", 0);
  ASSERT_TRUE(server.ok()) << server.status();
  TestPool pool;
  pool.addresses.push_back((*server)->local_address());
  pool.servers.push_back(*std::move(server));
  auto worker = MakeWorker(pool, 0, 1, 16);
  ASSERT_NE(worker, nullptr);
  ConsensusOptions o = Options(ConsensusRule::kEasgd, 0);
  o.every = 1;
  o.loop.max_steps = 3;
  const std::vector<float> z0 = PoolModel(pool.servers);
  auto result = Train(*worker, o);
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument)
      << result.status();
  EXPECT_EQ(PoolModel(pool.servers), z0);
}

TEST(ConsensusTest, BadOptionsAreRefused) {
  const auto refused = [](auto mutate) {
    ConsensusOptions o = Options(ConsensusRule::kAdmm, 0);
    mutate(o);
    return ValidateConsensusOptions(o).code() ==
           absl::StatusCode::kInvalidArgument;
  };
  EXPECT_TRUE(ValidateConsensusOptions(Options(ConsensusRule::kAdmm, 0)).ok());
  EXPECT_TRUE(refused([](ConsensusOptions& o) { o.every = 0; }));
  EXPECT_TRUE(refused([](ConsensusOptions& o) { o.alpha = 0; }));
  EXPECT_TRUE(refused([](ConsensusOptions& o) { o.alpha = 1.5f; }));
  EXPECT_TRUE(refused([](ConsensusOptions& o) { o.rho = 0; }));
  EXPECT_TRUE(refused([](ConsensusOptions& o) { o.rho = -1; }));
  EXPECT_TRUE(refused([](ConsensusOptions& o) { o.learning_rate = 0; }));
  EXPECT_TRUE(refused([](ConsensusOptions& o) { o.loop.batch_size = 0; }));
  EXPECT_TRUE(ParseConsensusMode("easgd").ok());
  EXPECT_EQ(ParseConsensusMode("elastic").status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace asgd
