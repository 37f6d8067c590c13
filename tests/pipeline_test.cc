// The pipeline mode's stages over real gRPC (127.0.0.1, port 0), each on
// its own thread with its own StageServer and GrpcDownstream:
//  * at every depth the stages' weights equal a one-process reference bit
//    for bit: each minibatch's gradient taken at the weights each stage's
//    forward pass used (the delays), applied with the same SGD step; at
//    depth 1 (no delay) that is plain SGD in one process;
//  * the delays and windows per stage are the configured ones;
//  * back-pressure: a caller that sends more than its window is refused
//    with RESOURCE_EXHAUSTED, and a stage never holds more than its window;
//  * malformed messages and mismatched hellos are refused with their codes;
//  * a stage that dies mid-run ends every other stage with an error.
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "gtest/gtest.h"
#include "grpcpp/grpcpp.h"
#include "common/status_macros.h"
#include "model/cpu_backend.h"
#include "model/cpu_layer_range.h"
#include "model/layer_range.h"
#include "proto/pipeline.grpc.pb.h"
#include "worker/consensus/consensus_rules.h"
#include "worker/pipeline/stage_grpc_client.h"
#include "worker/pipeline/stage_grpc_service.h"
#include "worker/pipeline/stage_plan.h"
#include "worker/pipeline/stage_runner.h"
#include "worker/pipeline/stage_updaters.h"
#include "worker/ps/connect.h"
#include "tests/test_pool.h"

namespace asgd {
namespace {

constexpr float kLearningRate = 0.05f;

ModelSpec Spec(bool lstm) {
  ModelSpec spec;
  spec.feature_dim = 5;
  spec.num_classes = 4;
  if (lstm) {
    spec.context = 0;
    LstmLayerSpec l;
    l.cells = 6;
    l.projection = 3;
    spec.layers = {LayerSpec::Lstm(l), LayerSpec::Lstm(l),
                   LayerSpec::Dense(7, Activation::kRelu)};
  } else {
    spec.context = 1;
    spec.layers = {LayerSpec::Dense(9, Activation::kRelu),
                   LayerSpec::Dense(8, Activation::kTanh),
                   LayerSpec::Dense(7, Activation::kRelu)};
  }
  return spec;
}

std::vector<StageBatch> Batches(const ModelSpec& spec, int n, int sequences,
                                int steps) {
  std::mt19937 rng(11);
  std::normal_distribution<float> normal(0, 1);
  std::vector<StageBatch> batches(n);
  for (int b = 0; b < n; ++b) {
    StageBatch& batch = batches[b];
    batch.seq = b;
    batch.sequences = sequences;
    batch.steps = steps;
    batch.values.resize(int64_t{batch.rows()} * spec.input_dim());
    for (float& x : batch.values) x = normal(rng);
    batch.labels.resize(batch.rows());
    for (int i = 0; i < batch.rows(); ++i) {
      batch.labels[i] = (i + b) % 5 == 4 ? kNoLabel : (i * 3 + b) % 4;
    }
  }
  return batches;
}

// Stage 0's upstream: the given minibatches; keeps the answers.
class VectorUpstream final : public UpstreamLink {
 public:
  explicit VectorUpstream(std::vector<StageBatch> batches)
      : batches_(std::move(batches)) {}
  absl::StatusOr<std::optional<StageBatch>> Receive() override {
    if (next_ == batches_.size()) return std::optional<StageBatch>();
    return std::optional<StageBatch>(batches_[next_++]);
  }
  absl::Status Answer(StageGrad grad) override {
    answers.push_back(std::move(grad));
    return absl::OkStatus();
  }
  absl::Status Finish() override { return absl::OkStatus(); }
  void Abort(const absl::Status&) override {}
  std::vector<StageGrad> answers;

 private:
  std::vector<StageBatch> batches_;
  size_t next_ = 0;
};

// The last stage's upstream in a run where it dies: after `live`
// minibatches its server shuts down mid-stream, as when the process dies.
class DyingUpstream final : public UpstreamLink {
 public:
  DyingUpstream(StageServer* server, int live) : server_(server), live_(live) {}
  absl::StatusOr<std::optional<StageBatch>> Receive() override {
    if (received_++ == live_) {
      server_->Shutdown();
      return absl::AbortedError("killed");
    }
    return server_->Receive();
  }
  absl::Status Answer(StageGrad grad) override {
    return server_->Answer(std::move(grad));
  }
  absl::Status Finish() override { return server_->Finish(); }
  void Abort(const absl::Status& status) override { server_->Abort(status); }

 private:
  StageServer* const server_;
  const int live_;
  int received_ = 0;
};

struct PipelineRun {
  std::vector<absl::Status> status;
  std::vector<StageStats> stats;
  std::vector<float> params;  // every stage's, in the flat model
  std::vector<StageGrad> answers;
};

// Runs every stage of `plan` on its own thread over gRPC. With
// `kill_after` >= 0 the last stage dies after that many minibatches.
// Makes stage s's updater (null: the runner's LocalSgd).
using MakeUpdater =
    std::function<std::unique_ptr<StageUpdater>(int s, const LayerRange&)>;

// Stage s's layer ranges (null: the CPU's).
using MakeRanges = std::function<LayerRangeFactory(int s)>;

PipelineRun RunPipeline(const ModelSpec& spec, const StagePlan& plan,
                        int depth, const std::vector<float>& initial,
                        const std::vector<StageBatch>& batches, int max_rows,
                        int kill_after = -1,
                        const MakeUpdater& make_updater = nullptr,
                        const MakeRanges& make_ranges = nullptr) {
  const int S = plan.stages();
  std::vector<std::unique_ptr<StageRunner>> runners(S);
  std::vector<std::unique_ptr<StageServer>> servers(S);
  std::vector<std::unique_ptr<StageUpdater>> updaters(S);
  StageGroup group;
  group.num_stages = S;
  group.bounds = plan.bounds;
  group.layout_fingerprint = "test";
  group.max_rows = max_rows;
  for (int s = 0; s < S; ++s) {
    StageRunnerOptions o;
    o.spec = spec;
    o.plan = plan;
    o.stage = s;
    o.depth = depth;
    o.learning_rate = kLearningRate;
    o.max_rows = max_rows;
    if (make_ranges) o.range_factory = make_ranges(s);
    auto runner = StageRunner::Create(o);
    EXPECT_TRUE(runner.ok()) << runner.status();
    runners[s] = *std::move(runner);
    if (make_updater) {
      updaters[s] = make_updater(s, runners[s]->layers());
      runners[s]->set_updater(updaters[s].get());
    }
    if (s == 0) continue;
    StageServerOptions so;
    so.host = "127.0.0.1";
    so.group = group;
    so.group.stage = s;
    so.group.in_flight = StageWindow(depth, s - 1);
    so.shape.max_rows = max_rows;
    so.shape.width = runners[s]->layers().in_dim();
    so.shape.num_classes = spec.num_classes;
    so.shape.sequences = spec.is_sequence();
    so.idle_timeout = absl::Seconds(30);
    auto server = StageServer::Start(so);
    EXPECT_TRUE(server.ok()) << server.status();
    servers[s] = *std::move(server);
  }
  PipelineRun run;
  run.status.resize(S);
  run.stats.resize(S);
  run.params = initial;
  VectorUpstream data(batches);
  std::vector<std::thread> threads;
  for (int s = 0; s < S; ++s) {
    threads.emplace_back([&, s] {
      StageRunner& runner = *runners[s];
      std::unique_ptr<GrpcDownstream> down;
      if (!runner.last()) {
        GrpcDownstreamOptions d;
        d.address = absl::StrCat("127.0.0.1:", servers[s + 1]->port());
        d.group = group;
        d.group.stage = s;
        d.group.in_flight = runner.window();
        d.out_width = runner.layers().out_dim();
        d.connect_timeout = absl::Seconds(10);
        auto connected = GrpcDownstream::Connect(d);
        if (!connected.ok()) {
          run.status[s] = connected.status();
          if (s > 0) servers[s]->Abort(connected.status());
          return;
        }
        down = *std::move(connected);
      }
      UpstreamLink* up = s == 0 ? static_cast<UpstreamLink*>(&data)
                                : servers[s].get();
      const LayerRange& range = runner.layers();
      absl::Span<float> mine = absl::MakeSpan(run.params)
                                   .subspan(range.param_offset(),
                                            range.param_count());
      std::optional<DyingUpstream> dying;
      if (kill_after >= 0 && s == S - 1) {
        dying.emplace(servers[s].get(), kill_after);
        up = &*dying;
      }
      run.status[s] = runner.Run(mine, up, down.get());
      run.stats[s] = runner.stats();
    });
  }
  for (std::thread& t : threads) t.join();
  run.answers = std::move(data.answers);
  return run;
}

// The reference: minibatch n's gradient, in one process, at the weights
// each stage's forward pass of n used (stage s's after max(0, n - K_s + 1)
// of its updates), then each stage's SGD step.
std::vector<float> Reference(const ModelSpec& spec, const StagePlan& plan,
                             int depth, const std::vector<float>& initial,
                             const std::vector<StageBatch>& batches,
                             int max_rows, std::vector<double>* losses) {
  auto backend = CreateCpuBackend(spec, max_rows);
  EXPECT_TRUE(backend.ok());
  const int S = plan.stages();
  std::vector<std::vector<std::vector<float>>> history(S);  // [s][updates]
  for (int s = 0; s < S; ++s) history[s].push_back(initial);
  std::vector<float> current = initial, used(initial.size()),
                     grad(initial.size());
  for (size_t n = 0; n < batches.size(); ++n) {
    for (int s = 0; s < S; ++s) {
      const int64_t k = std::max<int64_t>(
          0, static_cast<int64_t>(n) - StageWindow(depth, s) + 1);
      const int64_t begin = LayerParamOffset(spec, plan.bounds[s]);
      const int64_t end = LayerParamOffset(spec, plan.bounds[s + 1] - 1) +
                          LayerParamCount(spec, plan.bounds[s + 1] - 1);
      std::copy(history[s][k].begin() + begin, history[s][k].begin() + end,
                used.begin() + begin);
    }
    const StageBatch& b = batches[n];
    Batch batch{b.sequences, b.steps, b.values, b.labels};
    auto r = (*backend)->ComputeGradient(used, batch, absl::MakeSpan(grad));
    EXPECT_TRUE(r.ok());
    losses->push_back(r->loss);
    SgdStep(grad, kLearningRate, absl::MakeSpan(current));
    for (int s = 0; s < S; ++s) history[s].push_back(current);
  }
  return current;
}

struct Case {
  bool lstm;
  const char* plan;
  int depth;
};

class PipelineTest : public ::testing::TestWithParam<Case> {};

TEST_P(PipelineTest, StagesEqualTheDelayedReferenceBitForBit) {
  const Case c = GetParam();
  const ModelSpec spec = Spec(c.lstm);
  auto plan = ParseStagePlan(spec, c.plan);
  ASSERT_TRUE(plan.ok()) << plan.status();
  const int sequences = c.lstm ? 3 : 8, steps = c.lstm ? 4 : 1;
  const int n = 9;
  const std::vector<StageBatch> batches = Batches(spec, n, sequences, steps);
  const std::vector<float> initial = InitialParams(spec, 5);
  const PipelineRun run = RunPipeline(spec, *plan, c.depth, initial, batches,
                                      sequences * steps);
  for (int s = 0; s < plan->stages(); ++s) {
    ASSERT_TRUE(run.status[s].ok()) << "stage " << s << ": " << run.status[s];
  }
  std::vector<double> losses;
  const std::vector<float> want = Reference(spec, *plan, c.depth, initial,
                                            batches, sequences * steps,
                                            &losses);
  EXPECT_EQ(run.params, want);
  ASSERT_EQ(run.answers.size(), static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) {
    EXPECT_EQ(run.answers[i].seq, static_cast<uint64_t>(i));
    EXPECT_EQ(run.answers[i].loss, losses[i]) << "minibatch " << i;
  }
  // The configured delays: stage s's updates after the first K_s - 1
  // (filling the pipeline) all come K_s - 1 updates late.
  for (int s = 0; s < plan->stages(); ++s) {
    const int window = StageWindow(c.depth, s);
    const StageStats& st = run.stats[s];
    EXPECT_EQ(st.minibatches, n);
    EXPECT_EQ(st.max_in_flight, window) << "stage " << s;
    std::map<int, int64_t> want_delays;
    for (int d = 0; d < window - 1; ++d) want_delays[d] = 1;
    want_delays[window - 1] = n - (window - 1);
    EXPECT_EQ(st.delays, want_delays) << "stage " << s;
  }
  // Without delays the reference is plain SGD.
  if (c.depth == 1) {
    auto backend = CreateCpuBackend(spec, sequences * steps);
    ASSERT_TRUE(backend.ok());
    std::vector<float> w = initial, g(w.size());
    for (const StageBatch& b : batches) {
      Batch batch{b.sequences, b.steps, b.values, b.labels};
      ASSERT_TRUE((*backend)->ComputeGradient(w, batch, absl::MakeSpan(g)).ok());
      SgdStep(g, kLearningRate, absl::MakeSpan(w));
    }
    EXPECT_EQ(run.params, w);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Plans, PipelineTest,
    ::testing::Values(Case{false, "0,1-2,3", 1}, Case{false, "0,1-2,3", 2},
                      Case{false, "0,1-2,3", 3}, Case{false, "0-2,3", 2},
                      Case{true, "0,1,2-3", 1}, Case{true, "0,1,2-3", 3}));

// Evaluation minibatches between the training ones: at depth 1 each is
// answered with the loss of the model as trained so far and changes
// nothing; at full depth every stage passes each through, in order.
TEST(PipelineTest, EvaluationMinibatchesPassThroughWithoutUpdates) {
  const ModelSpec spec = Spec(false);
  auto plan = ParseStagePlan(spec, "0,1-2,3");
  ASSERT_TRUE(plan.ok());
  std::vector<StageBatch> train = Batches(spec, 8, 8, 1);
  std::vector<StageBatch> mixed;
  for (size_t i = 0; i < train.size(); ++i) {
    mixed.push_back(train[i]);
    if (i % 3 == 1) {
      StageBatch eval = train[(i + 5) % train.size()];
      eval.evaluate = true;
      mixed.push_back(eval);
    }
  }
  for (size_t i = 0; i < mixed.size(); ++i) mixed[i].seq = i;
  const std::vector<float> initial = InitialParams(spec, 5);
  const PipelineRun run = RunPipeline(spec, *plan, 1, initial, mixed, 8);
  for (int s = 0; s < 3; ++s) ASSERT_TRUE(run.status[s].ok()) << run.status[s];
  ASSERT_EQ(run.answers.size(), mixed.size());
  // The reference: SGD over the training minibatches; an evaluation's loss
  // is the model's at that point.
  auto backend = CreateCpuBackend(spec, 8);
  ASSERT_TRUE(backend.ok());
  std::vector<float> w = initial, g(w.size());
  for (size_t i = 0; i < mixed.size(); ++i) {
    const StageBatch& b = mixed[i];
    Batch batch{b.sequences, b.steps, b.values, b.labels};
    auto r = (*backend)->ComputeGradient(w, batch, absl::MakeSpan(g));
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(run.answers[i].seq, i);
    EXPECT_EQ(run.answers[i].loss, r->loss) << "minibatch " << i;
    EXPECT_EQ(run.answers[i].correct, r->correct) << "minibatch " << i;
    EXPECT_TRUE(run.answers[i].values.empty());
    if (!b.evaluate) SgdStep(g, kLearningRate, absl::MakeSpan(w));
  }
  EXPECT_EQ(run.params, w);
  for (int s = 0; s < 3; ++s) {
    EXPECT_EQ(run.stats[s].minibatches, 8);
    EXPECT_EQ(run.stats[s].evaluated, 3);
  }
  // At full depth they pass through every stage too.
  const PipelineRun deep = RunPipeline(spec, *plan, 3, initial, mixed, 8);
  for (int s = 0; s < 3; ++s) {
    ASSERT_TRUE(deep.status[s].ok()) << deep.status[s];
    EXPECT_EQ(deep.stats[s].minibatches, 8);
    EXPECT_EQ(deep.stats[s].evaluated, 3);
    EXPECT_LE(deep.stats[s].max_in_flight, StageWindow(3, s));
  }
  ASSERT_EQ(deep.answers.size(), mixed.size());
  for (size_t i = 0; i < mixed.size(); ++i) EXPECT_EQ(deep.answers[i].seq, i);
}

// The weights on the servers' pool: with pull_every 1 each stage's ADD
// pushes and pulls give exactly the local run's weights, and the servers
// hold them; with local weights handed off at the end, the servers hold
// every stage's layers exactly too.
TEST(PipelineTest, WeightsOnTheServersEqualLocalOnesAndHandOffsLandExactly) {
  const ModelSpec spec = Spec(false);
  auto plan = ParseStagePlan(spec, "0,1-2,3");
  ASSERT_TRUE(plan.ok());
  const std::vector<StageBatch> batches = Batches(spec, 9, 8, 1);
  const std::vector<float> initial = InitialParams(spec, 1);  // the pool's
  const PipelineRun local = RunPipeline(spec, *plan, 3, initial, batches, 8);
  for (const absl::Status& s : local.status) ASSERT_TRUE(s.ok()) << s;

  for (const bool on_servers : {true, false}) {
    SCOPED_TRACE(on_servers ? "on the servers" : "handed off");
    auto pool = StartTestPool(spec, 2, 2, kLearningRate);
    ASSERT_TRUE(pool.ok()) << pool.status();
    ASSERT_EQ(PoolModel(pool->servers), initial);
    std::vector<std::unique_ptr<ParamClient>> clients(3);
    for (auto& c : clients) {
      auto client = ConnectToPool(pool->addresses, PoolClientOptions());
      ASSERT_TRUE(client.ok()) << client.status();
      c = *std::move(client);
    }
    std::vector<ServerSgd*> server_sgd(3, nullptr);
    const MakeUpdater make = [&](int s, const LayerRange& range)
        -> std::unique_ptr<StageUpdater> {
      if (!on_servers) {
        return std::make_unique<HandOffSgd>(clients[s].get(),
                                            range.param_offset(),
                                            range.param_count(),
                                            kLearningRate, s);
      }
      std::vector<float> model(initial.size());
      std::vector<uint64_t> versions;
      EXPECT_TRUE(clients[s]->Pull(absl::MakeSpan(model), &versions).ok());
      auto u = std::make_unique<ServerSgd>(
          clients[s].get(), range.param_offset(), range.param_count(),
          kLearningRate, /*pull_every=*/1, s, versions);
      server_sgd[s] = u.get();
      return u;
    };
    const PipelineRun run = RunPipeline(spec, *plan, 3, initial, batches, 8,
                                        /*kill_after=*/-1, make);
    for (const absl::Status& s : run.status) ASSERT_TRUE(s.ok()) << s;
    EXPECT_EQ(run.params, local.params);
    EXPECT_EQ(PoolModel(pool->servers), local.params);
    if (on_servers) {
      for (ServerSgd* u : server_sgd) {
        EXPECT_EQ(u->applied(), 9);
        EXPECT_EQ(u->dropped(), 0);
        EXPECT_EQ(u->pulls(), 9);
      }
    }
  }
}

TEST(PipelineTest, WindowsAndDelaysFollowTheDepth) {
  EXPECT_EQ(StageWindow(3, 0), 3);
  EXPECT_EQ(StageWindow(3, 1), 2);
  EXPECT_EQ(StageWindow(3, 2), 1);
  EXPECT_EQ(StageWindow(2, 2), 1);
  EXPECT_EQ(StageWindow(1, 0), 1);
  StagePlan plan;
  plan.bounds = {0, 1, 3, 4};
  for (int s = 0; s < 3; ++s) {
    EXPECT_EQ(StageWindow(plan.stages(), s) - 1, plan.Delay(s));
  }
}

TEST(PipelineTest, ADeadStageEndsEveryOtherWithAnError) {
  const ModelSpec spec = Spec(false);
  auto plan = ParseStagePlan(spec, "0,1-2,3");
  ASSERT_TRUE(plan.ok());
  const std::vector<StageBatch> batches = Batches(spec, 40, 8, 1);
  const std::vector<float> initial = InitialParams(spec, 5);
  const PipelineRun run =
      RunPipeline(spec, *plan, 3, initial, batches, 8, /*kill_after=*/5);
  EXPECT_EQ(run.status[1].code(), absl::StatusCode::kUnavailable)
      << run.status[1];
  EXPECT_FALSE(run.status[0].ok());
  EXPECT_NE(run.status[0].message().find("stage 1"), std::string::npos)
      << run.status[0];
  EXPECT_LT(run.answers.size(), batches.size());
}

// A CPU range whose stage counts its backward passes (in *backward, shared
// by the stage's ranges) and, from the stage's `fail_at`th on, fails as a
// device would (Internal), writing nothing.
class FailingRange final : public LayerRange {
 public:
  FailingRange(const ModelSpec& spec, std::unique_ptr<LayerRange> cpu,
               int fail_at, std::shared_ptr<int> backward)
      : LayerRange(spec, cpu->first(), cpu->last()),
        cpu_(std::move(cpu)),
        fail_at_(fail_at),
        backward_(std::move(backward)) {}
  absl::Status Forward(const float* params, const float* in, int sequences,
                       int steps) override {
    return cpu_->Forward(params, in, sequences, steps);
  }
  const float* out() const override { return cpu_->out(); }
  BatchResult Loss(const Batch& batch) override { return cpu_->Loss(batch); }
  absl::Status Backward(const float* params, const float* in,
                        const float* dout, int sequences, int steps,
                        float* dparams, float* din) override {
    if (++*backward_ >= fail_at_) {
      return absl::InternalError("device fault in the test's range");
    }
    return cpu_->Backward(params, in, dout, sequences, steps, dparams, din);
  }

 private:
  std::unique_ptr<LayerRange> cpu_;
  const int fail_at_;
  const std::shared_ptr<int> backward_;  // the stage's thread only
};

// The stage's ranges come from its factory: one per minibatch in flight and
// one for evaluations, each made once. A range whose device fails ends its
// stage with that error (nothing of the failed pass applied) and every
// other stage with an error naming it, as a dead stage does.
TEST(PipelineTest, StagesComputeOnTheirFactorysRangesAndAFailingOneEndsTheRun) {
  const ModelSpec spec = Spec(false);
  auto plan = ParseStagePlan(spec, "0,1-2,3");
  ASSERT_TRUE(plan.ok());
  const std::vector<StageBatch> batches = Batches(spec, 30, 8, 1);
  const std::vector<float> initial = InitialParams(spec, 5);
  std::vector<int> made(plan->stages(), 0);
  std::mutex mu;
  auto counting = [&](int s, int fail_at) {
    auto backward = std::make_shared<int>(0);
    return LayerRangeFactory(
        [&, s, fail_at, backward](const ModelSpec& sp, int first, int last,
                                  int rows)
            -> absl::StatusOr<std::unique_ptr<LayerRange>> {
          {
            std::lock_guard<std::mutex> lock(mu);
            ++made[s];
          }
          ASGD_ASSIGN_OR_RETURN(std::unique_ptr<LayerRange> cpu,
                                CreateCpuLayerRange(sp, first, last, rows));
          return std::unique_ptr<LayerRange>(
              new FailingRange(sp, std::move(cpu), fail_at, backward));
        });
  };
  // Never failing: the same model as the CPU's own ranges, bit for bit.
  const PipelineRun want = RunPipeline(spec, *plan, 3, initial, batches, 8);
  const PipelineRun got = RunPipeline(
      spec, *plan, 3, initial, batches, 8, -1, nullptr,
      [&](int s) { return counting(s, 1 << 30); });
  for (int s = 0; s < plan->stages(); ++s) {
    ASSERT_TRUE(got.status[s].ok()) << s << ": " << got.status[s];
    EXPECT_EQ(made[s], StageWindow(3, s) + 1) << s;
  }
  EXPECT_EQ(got.params, want.params);
  // Stage 1's range fails on its 6th backward pass.
  const PipelineRun failed = RunPipeline(
      spec, *plan, 3, initial, batches, 8, -1, nullptr, [&](int s) {
        return counting(s, s == 1 ? 6 : 1 << 30);
      });
  EXPECT_EQ(failed.status[1].code(), absl::StatusCode::kInternal)
      << failed.status[1];
  EXPECT_EQ(failed.stats[1].minibatches, 5);
  EXPECT_FALSE(failed.status[0].ok());
  EXPECT_NE(failed.status[0].message().find("stage 1"), std::string::npos)
      << failed.status[0];
  EXPECT_FALSE(failed.status[2].ok());
  EXPECT_LT(failed.answers.size(), batches.size());
}

// Stage 1 of 2 (layers [1, 2) of a 2-layer plan), minibatches of at most 4
// rows of 3 values, 5 classes, on 127.0.0.1.
StageServerOptions SmallStage(int in_flight) {
  StageServerOptions so;
  so.host = "127.0.0.1";
  so.group.stage = 1;
  so.group.num_stages = 2;
  so.group.bounds = {0, 1, 2};
  so.group.layout_fingerprint = "f";
  so.group.max_rows = 4;
  so.group.in_flight = in_flight;
  so.shape.max_rows = 4;
  so.shape.width = 3;
  so.shape.num_classes = 5;
  so.idle_timeout = absl::Seconds(10);
  return so;
}

// A hand-written client on one StageServer.
class StageServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    StageServerOptions so = SmallStage(/*in_flight=*/2);
    group_ = so.group;
    auto server = StageServer::Start(so);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    auto channel = grpc::CreateChannel(
        absl::StrCat("127.0.0.1:", server_->port()),
        grpc::InsecureChannelCredentials());
    stub_ = asgd::v1::Stage::NewStub(channel);
  }

  asgd::v1::StageForward Hello(int in_flight = 2) {
    StageGroup g = group_;
    g.stage = 0;
    g.in_flight = in_flight;
    asgd::v1::StageForward m;
    *m.mutable_hello() = ToHello(g);
    return m;
  }

  static asgd::v1::StageForward Minibatch(uint64_t seq, float value = 1.0f) {
    StageBatch b;
    b.seq = seq;
    b.sequences = 1;
    b.values = {value, 2, 3};
    b.labels = {1};
    asgd::v1::StageForward m;
    EncodeActivations(b, m.mutable_activations());
    return m;
  }

  // Writes `msgs` on a new stream and returns its final status (the
  // server ends it on the first bad message).
  grpc::Status Send(const std::vector<asgd::v1::StageForward>& msgs) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() +
                     std::chrono::seconds(10));
    auto stream = stub_->Relay(&ctx);
    for (const auto& m : msgs) {
      if (!stream->Write(m)) break;
    }
    stream->WritesDone();
    asgd::v1::StageBackward ignored;
    while (stream->Read(&ignored)) {
    }
    return stream->Finish();
  }

  StageGroup group_;
  std::unique_ptr<StageServer> server_;
  std::unique_ptr<asgd::v1::Stage::Stub> stub_;
};

TEST_F(StageServerTest, MoreThanTheWindowInFlightIsRefused) {
  // Nobody answers (the stage is busy): the third minibatch of a window of
  // two is refused, and the stage holds only two.
  const grpc::Status s =
      Send({Hello(2), Minibatch(0), Minibatch(1), Minibatch(2)});
  EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED)
      << s.error_message();
  EXPECT_EQ(server_->received(), 2);
  auto r = server_->Receive();
  EXPECT_EQ(r.status().code(), absl::StatusCode::kResourceExhausted);
}

TEST_F(StageServerTest, AWindowLargerThanTheStageAllowsIsRefused) {
  const grpc::Status s = Send({Hello(3), Minibatch(0)});
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_EQ(server_->received(), 0);
}

TEST_F(StageServerTest, NoHelloFirstIsRefused) {
  const grpc::Status s = Send({Minibatch(0)});
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(server_->received(), 0);
}

TEST_F(StageServerTest, ANaNActivationIsRefusedAndNothingDelivered) {
  const grpc::Status s =
      Send({Hello(), Minibatch(0, std::numeric_limits<float>::quiet_NaN())});
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(server_->received(), 0);
  EXPECT_EQ(server_->Receive().status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(StageServerTest, AnEndThatMiscountsIsRefused) {
  asgd::v1::StageForward end;
  end.mutable_end()->set_minibatches(3);
  const grpc::Status s = Send({Hello(), end});
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
}

TEST_F(StageServerTest, AMessageAfterTheEndIsRefused) {
  asgd::v1::StageForward end;
  end.mutable_end()->set_minibatches(0);
  const grpc::Status s = Send({Hello(), end, Minibatch(0)});
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(server_->received(), 0);
}

TEST_F(StageServerTest, AStreamCutOffWithoutItsEndIsUnavailable) {
  // The client closes without an end: its minibatch is not worked on (its
  // answer has nowhere to go), the stage learns the stream broke.
  const grpc::Status s = Send({Hello(), Minibatch(0)});
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE);
  auto next = server_->Receive();
  EXPECT_EQ(next.status().code(), absl::StatusCode::kUnavailable)
      << next.status();
}

TEST_F(StageServerTest, OneStreamPerRun) {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() +
                   std::chrono::seconds(10));
  auto first = stub_->Relay(&ctx);
  ASSERT_TRUE(first->Write(Hello()));
  ASSERT_TRUE(first->Write(Minibatch(0)));
  auto got = server_->Receive();  // the first stream is attached
  ASSERT_TRUE(got.ok() && got->has_value());
  const grpc::Status second = Send({Hello()});
  EXPECT_EQ(second.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  ctx.TryCancel();
  first->Finish();
}

// A stage serves with the worker's own settings (WorkerServiceSecurity): a
// worker that only verifies its servers (tls_ca, no certificate of its own)
// still listens, and a token guards the stage's stream.
TEST(StageSecurityTest, TheTokenGuardsTheStreamAndClientOnlyTlsStillListens) {
  StageServerOptions so = SmallStage(/*in_flight=*/1);
  so.security.tls_ca = "/nonexistent/ca.pem";  // verifies servers only
  so.security.token = "s3cret-token-0123456789";
  auto server = StageServer::Start(so);
  ASSERT_TRUE(server.ok()) << server.status();

  GrpcDownstreamOptions d;
  d.address = absl::StrCat("127.0.0.1:", (*server)->port());
  d.group = so.group;
  d.group.stage = 0;
  d.out_width = 3;
  d.connect_timeout = absl::Seconds(10);
  d.security.token = "wrong-token-0123456789";
  d.security.allow_cleartext_token = true;
  auto wrong = GrpcDownstream::Connect(d);
  absl::Status sent = wrong.ok() ? (*wrong)->SendEnd() : wrong.status();
  if (sent.ok()) sent = (*wrong)->Finish();
  EXPECT_EQ(sent.code(), absl::StatusCode::kUnauthenticated) << sent;
  EXPECT_EQ((*server)->received(), 0);

  d.security.token = so.security.token;
  auto right = GrpcDownstream::Connect(d);
  ASSERT_TRUE(right.ok()) << right.status();
  StageBatch b;
  b.sequences = 1;
  b.values = {1, 2, 3};
  b.labels = {2};
  ASSERT_TRUE((*right)->Send(b).ok());
  auto got = (*server)->Receive();
  ASSERT_TRUE(got.ok() && got->has_value()) << got.status();
  EXPECT_EQ((**got).values, b.values);
}

}  // namespace
}  // namespace asgd
