// The decentralized training loop without a network: delay-by-one applies
// each gradient one step late, the metrics count exchanges, modes parse.
// (Groups of workers over real gRPC: tests/decentralized_group_test.cc.)
#include "worker/peer/decentralized_trainer.h"

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "common/metrics_testing.h"
#include "gtest/gtest.h"
#include "model/cpu_backend.h"
#include "model/staging_spy.h"
#include "prometheus/registry.h"
#include "worker/data/frame_examples.h"
#include "worker/data/stream_source.h"
#include "worker/data/toy_task.h"
#include "worker/data/utterances.h"
#include "worker/peer/decentralized_metrics.h"

namespace asgd {
namespace {

ModelSpec SmallSpec() { return ToyModel("dnn"); }

// A lone worker, delay-by-one, minibatches of 32 drawn with seed 5.
DecentralizedOptions DelayByOneOptions(int steps, float lr) {
  DecentralizedOptions options;
  options.loop.batch_size = 32;
  options.loop.max_steps = steps;
  options.loop.epochs = 0;
  options.loop.seed = 5;
  options.learning_rate = lr;
  options.delay_by_one = true;
  return options;
}

TEST(DelayByOneTest, AppliesEachGradientOneStepLate) {
  const Utterances utts = ToyUtterances(2, 0, 1, 24, 0.5f, 1.0f);
  FrameExamples train(&utts, 1);
  const std::vector<float> x0 = InitialParams(SmallSpec(), 3);
  const float lr = 0.1f;
  auto dnn = CreateCpuBackend(SmallSpec(), 32);
  ASSERT_TRUE(dnn.ok());
  PeerModel model(x0);
  NoPeers peers;
  const DecentralizedOptions options = DelayByOneOptions(3, lr);
  DecentralizedTrainer trainer(&model, &peers, nullptr, dnn->get(), &train,
                               nullptr, options, nullptr);
  auto result = trainer.Run();
  ASSERT_TRUE(result.ok()) << result.status();

  // The same minibatches by hand: g_t is computed on x_{t-1} (x_{-1} = x_0),
  // x_{t+1} = x_t - lr g_{t-1}, and the last gradient is applied at the end.
  ExampleSampler sampler(&train, options.loop.seed * 7919);
  BatchBuffer batch(32, 1, train.input_dim());
  std::vector<float> grad(x0.size());
  std::vector<float> x = x0, prev = x0, step_in = x0;
  std::vector<std::vector<float>> grads;
  for (int t = 0; t < 3; ++t) {
    sampler.Next(&batch);
    step_in = x;  // the weights at the start of step t (before its update)
    ASSERT_TRUE(
        (*dnn)
            ->ComputeGradient(step_in, batch.view(), absl::MakeSpan(grad))
            .ok());
    if (!grads.empty()) {
      for (size_t i = 0; i < x.size(); ++i)
        x[i] -= lr * (1.0f * grads.back()[i]);
    }
    grads.push_back(grad);
  }
  for (size_t i = 0; i < x.size(); ++i) x[i] -= lr * (1.0f * grads.back()[i]);
  // Steps 0 and 1 computed their gradients on x_0 itself.
  EXPECT_EQ(result->train.params, x);
}

// With a backend that stages minibatches (as the CUDA backend does), each
// one after the first is handed to it a step ahead, unchanged until it
// computes, and the model is the same.
TEST(DelayByOneTest, AStagingBackendGetsEachMinibatchAStepAhead) {
  const Utterances utts = ToyUtterances(2, 0, 1, 24, 0.5f, 1.0f);
  FrameExamples train(&utts, 1);
  const std::vector<float> x0 = InitialParams(SmallSpec(), 3);
  std::vector<std::vector<float>> results;
  for (bool staging : {false, true}) {
    auto dnn = CreateCpuBackend(SmallSpec(), 32);
    ASSERT_TRUE(dnn.ok());
    StagingSpy* spy;
    std::unique_ptr<ModelBackend> backend =
        MaybeStaging(*std::move(dnn), staging, &spy);
    PeerModel model(x0);
    NoPeers peers;
    DecentralizedTrainer trainer(&model, &peers, nullptr, backend.get(), &train,
                                 nullptr, DelayByOneOptions(6, 0.1f), nullptr);
    auto result = trainer.Run();
    ASSERT_TRUE(result.ok()) << result.status();
    results.push_back(result->train.params);
    if (spy != nullptr) {
      EXPECT_EQ(spy->calls, 6);
      EXPECT_EQ(spy->staged_calls, 5);
      EXPECT_EQ(spy->changed_since_announced, 0);
    }
  }
  EXPECT_EQ(results[0], results[1]);
  EXPECT_NE(results[0], x0);
}

// Minibatches streamed from disk-sized data (open_source): a lone adpsgd
// worker trains through its epochs and learns the task.
TEST(DecentralizedStreamTest, TrainsFromAStreamedSourceForItsEpochs) {
  const Utterances utts = ToyUtterances(1);  // 20 x 50 frames
  FrameExamples shape(&utts, SmallSpec().context);
  auto dnn = CreateCpuBackend(SmallSpec(), 32);
  ASSERT_TRUE(dnn.ok());
  PeerModel model(InitialParams(SmallSpec(), 3));
  NoPeers peers;
  DecentralizedOptions options;
  options.loop.batch_size = 32;
  options.loop.epochs = 3;
  options.loop.log_every = 0;
  options.learning_rate = 0.2f;
  int opened = 0;
  options.open_source = [&](uint64_t seed, double epochs)
      -> absl::StatusOr<std::unique_ptr<BatchSource>> {
    ++opened;
    StreamOptions s;
    s.window_bytes = 200 * ExampleBytesPerFrame(4);
    s.seed = seed;
    s.epochs = epochs;
    auto source = StreamSource::Create(std::make_unique<UtterancesStream>(&utts),
                                       SmallSpec(), {}, s);
    if (!source.ok()) return source.status();
    return std::unique_ptr<BatchSource>(*std::move(source));
  };
  DecentralizedTrainer trainer(&model, &peers, nullptr, dnn->get(), &shape,
                               &shape, options, nullptr);
  auto result = trainer.Run();
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(opened, 1);
  EXPECT_EQ(result->train.steps, 3 * 1000 / 32);  // whole minibatches
  EXPECT_EQ(result->train.frames, 3 * 1000 / 32 * 32);
  auto accuracy = EvaluateAccuracy(dnn->get(), result->train.params, shape, 32);
  ASSERT_TRUE(accuracy.ok());
  EXPECT_GT(*accuracy, 0.8);
}

// A minibatch with a non-finite gradient (a frame with NaN features) stops
// a lone adpsgd worker before the gradient reaches its model, with or
// without delay-by-one: the model stays finite and the error, typed,
// names the step.
TEST(DecentralizedNonFiniteTest, StopsBeforeTheGradientIsApplied) {
  Utterances utts = ToyUtterances(1);
  std::vector<float> f(50 * 4, 1.0f);
  for (int t = 0; t < 50; ++t) f[t * 4 + 1] = std::nanf("");
  utts.Add(f, std::vector<int32_t>(50, 1));
  FrameExamples train(&utts, SmallSpec().context);
  for (bool delayed : {false, true}) {
    auto dnn = CreateCpuBackend(SmallSpec(), 32);
    ASSERT_TRUE(dnn.ok());
    PeerModel model(InitialParams(SmallSpec(), 3));
    NoPeers peers;
    DecentralizedOptions options;
    options.loop.batch_size = 32;
    options.loop.epochs = 0;
    options.loop.max_steps = 500;
    options.loop.log_every = 0;
    options.learning_rate = 0.1f;
    options.delay_by_one = delayed;
    DecentralizedTrainer trainer(&model, &peers, nullptr, dnn->get(), &train,
                                 nullptr, options, nullptr);
    const absl::Status s = trainer.Run().status();
    EXPECT_TRUE(IsNonFiniteStep(s)) << s;
    EXPECT_NE(s.message().find("training step "), absl::string_view::npos) << s;
    std::vector<float> w(model.size());
    model.Read(absl::MakeSpan(w));
    for (float x : w) ASSERT_TRUE(std::isfinite(x)) << "delayed " << delayed;
  }
}

TEST(DecentralizedMetricsTest, CountsExchangesAndKeepsTheDistance) {
  prometheus::Registry registry;
  DecentralizedMetrics metrics(registry, 3);
  metrics.OnAverage(AverageResult::kOk, 2.5);
  metrics.OnAverage(AverageResult::kFailed, 0);
  metrics.OnAverage(AverageResult::kSkipped, 0);
  metrics.OnAverage(AverageResult::kSkipped, 0);
  EXPECT_EQ(MetricValue(registry, "asgd_worker_consensus_distance", "", ""),
            2.5);
  metrics.OnAverageServed(1.25);
  EXPECT_EQ(MetricValue(registry, "asgd_worker_consensus_distance", "", ""),
            1.25);
  EXPECT_EQ(
      MetricValue(registry, "asgd_worker_peer_averages_total", "result", "ok"),
      1);
  EXPECT_EQ(MetricValue(registry, "asgd_worker_peer_averages_total", "result",
                        "failed"),
            1);
  EXPECT_EQ(MetricValue(registry, "asgd_worker_peer_averages_total", "result",
                        "skipped"),
            2);
  EXPECT_EQ(
      MetricValue(registry, "asgd_worker_peer_averages_served_total", "", ""),
      1);
}

TEST(DecentralizedModeTest, Parse) {
  EXPECT_TRUE(IsDecentralizedMode("adpsgd"));
  EXPECT_TRUE(IsDecentralizedMode("allreduce"));
  EXPECT_FALSE(IsDecentralizedMode("asgd"));
  EXPECT_EQ(*ParseDecentralizedMode("allreduce"),
            DecentralizedMode::kAllreduce);
}

}  // namespace
}  // namespace asgd
