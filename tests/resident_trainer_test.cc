// The resident model (model/backend.h; worker/ps/resident_push.h) through
// real servers: a worker whose backend keeps the model and sums (and
// 1-bit encodes) the gradients itself sends the same pushes, bit for bit,
// as one that computes every gradient into host memory, so the servers end
// with the same model. Two servers on 127.0.0.1 (port 0), one worker,
// pushes and pulls in turn (no background threads: the order is fixed),
// for float32, bfloat16 (rounded by the backend) and 1-bit pushes and 1
// or 3 minibatches per push. Then one resident worker with background
// pushes and pulls learns the toy task.
// With the client's exact copies kept by the backend (as --replay_on_device
// keeps them on the GPU; here the device replay's pass on the host,
// CreateHostReplayCopy), models pulled all from the copies are loaded from
// the backend's mirror, and the pushes are again the same; the mirrored
// models come down into host memory only for evaluations (which see the
// plain run's models) and for pulls that came partly as weights.
#include <algorithm>
#include <memory>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "common/wire_codec.h"
#include "gtest/gtest.h"
#include "model/cpu_backend.h"
#include "model/cuda/host_replay_copy.h"
#include "server/grpc_server.h"
#include "server/model_options.h"
#include "tests/test_pool.h"
#include "worker/data/make_examples.h"
#include "worker/data/toy_task.h"
#include "worker/data/utterances.h"
#include "worker/ps/grpc_param_client.h"
#include "worker/ps/trainer.h"

namespace asgd {
namespace {

// The CPU backend, recording which host buffers the trainer pins and
// which memory each model is loaded from.
class RecordingBackend final : public ModelBackend {
 public:
  explicit RecordingBackend(std::unique_ptr<ModelBackend> inner)
      : inner_(std::move(inner)) {}
  absl::string_view name() const override { return inner_->name(); }
  const ModelSpec& spec() const override { return inner_->spec(); }
  int max_rows() const override { return inner_->max_rows(); }
  absl::StatusOr<BatchResult> ComputeGradient(absl::Span<const float> params,
                                              const Batch& batch,
                                              absl::Span<float> grad) override {
    return inner_->ComputeGradient(params, batch, grad);
  }
  absl::Status LogPosteriors(absl::Span<const float> params,
                             const Batch& batch,
                             absl::Span<float> out) override {
    return inner_->LogPosteriors(params, batch, out);
  }
  absl::Status Predict(absl::Span<const float> params, const Batch& batch,
                       absl::Span<int32_t> out) override {
    if (evaluated.empty() ||
        !std::equal(params.begin(), params.end(), evaluated.back().begin(),
                    evaluated.back().end())) {
      evaluated.emplace_back(params.begin(), params.end());
    }
    return inner_->Predict(params, batch, out);
  }
  absl::Status LoadModel(absl::Span<const float> params) override {
    loads.push_back(params.data());
    loads_from_pinned += pinned.count(params.data());
    return ModelBackend::LoadModel(params);
  }
  absl::Status LoadMirroredModel(absl::Span<const float> params) override {
    ++mirrored_loads;
    return ModelBackend::LoadMirroredModel(params);
  }
  absl::Status DownloadMirror(absl::Span<float> buffer, int64_t begin,
                              int64_t count) override {
    downloaded += count;
    return ModelBackend::DownloadMirror(buffer, begin, count);
  }
  absl::Status TakeBf16(absl::Span<uint16_t> out) override {
    ++bf16_takes;
    return ModelBackend::TakeBf16(out);
  }
  absl::Status TakeTopK(const TopKPlan& plan,
                        std::vector<std::string>* out) override {
    ++top_k_takes;
    return ModelBackend::TakeTopK(plan, out);
  }
  absl::Status PinHostBuffer(absl::Span<const float> b) override {
    pinned.insert(b.data());
    ++pins;
    return absl::OkStatus();
  }
  void UnpinHostBuffer(absl::Span<const float> b) override {
    pinned.erase(b.data());
  }

  std::set<const float*> pinned;
  int pins = 0;
  // LoadModel's, also those of the default LoadMirroredModel (from the
  // mirror, not from a pinned buffer).
  std::vector<const float*> loads;
  int loads_from_pinned = 0;
  int mirrored_loads = 0;
  int64_t downloaded = 0;  // floats brought down from the mirrors
  // The models evaluations predicted with, each once, in order.
  std::vector<std::vector<float>> evaluated;
  int bf16_takes = 0;
  int top_k_takes = 0;

 private:
  std::unique_ptr<ModelBackend> inner_;
};

struct RunResult {
  std::vector<float> model;  // the servers' model after the run
  absl::StatusOr<TrainResult> result = absl::UnknownError("not run");
  std::unique_ptr<RecordingBackend> backend;  // what the run recorded
  DeltaPullStats pulls;                       // the client's, after the run
};

// `copies_on_backend`: the client's exact copies are kept by the backend.
// `weights_from_server1`: server 1 keeps no update log, so its slice of
// every pull comes as weights (Commit) while server 0's comes from the
// copies (CommitCopy).
RunResult Train(PushEncoding encoding, const TrainerOptions& options,
                bool copies_on_backend = false,
                bool weights_from_server1 = false) {
  const ModelSpec spec = ToyModel("dnn");
  std::vector<std::unique_ptr<GrpcServer>> servers;
  std::vector<std::string> addresses;
  for (int s = 0; s < 2; ++s) {
    ParamStoreOptions o;
    SetModel(spec, &o);
    o.server_index = s;
    o.num_servers = 2;
    o.num_shards = 2;
    o.optimizer.learning_rate = 0.1f;
    o.compressed_pushes = true;
    if (weights_from_server1 && s == 1) o.delta_log_bytes = 0;
    auto server =
        GrpcServer::Start(o, InitialParams(spec, 1), "127.0.0.1", 0);
    EXPECT_TRUE(server.ok()) << server.status();
    if (!server.ok()) return {};
    addresses.push_back((*server)->local_address());
    servers.push_back(*std::move(server));
  }
  PoolClientOptions co;
  co.push_encoding = encoding;
  auto client = GrpcParamClient::Create(addresses, co);
  EXPECT_TRUE(client.ok()) << client.status();
  if (!client.ok()) return {};
  const Utterances train_utts = ToyUtterances(1);
  const Utterances heldout_utts = ToyUtterances(2);
  auto train = MakeExamples(spec, &train_utts, ToyDataOptions());
  auto heldout = MakeExamples(spec, &heldout_utts, ToyDataOptions());
  EXPECT_TRUE(train.ok() && heldout.ok());
  auto cpu = CreateCpuBackend(
      spec, ShapeOfBatch(**train, options.loop.batch_size).rows());
  EXPECT_TRUE(cpu.ok());
  RunResult run;
  run.backend = std::make_unique<RecordingBackend>(*std::move(cpu));
  if (copies_on_backend) {
    const absl::Status kept = (*client)->KeepExactCopiesOn(
        [](int64_t count) { return CreateHostReplayCopy(count); });
    EXPECT_TRUE(kept.ok()) << kept;
  }
  Trainer trainer(client->get(), run.backend.get(), train->get(),
                  heldout->get(), options, nullptr);
  run.result = trainer.Run();
  run.pulls = (*client)->delta_pull_stats();
  run.model = PoolModel(servers);
  return run;
}

TrainerOptions InTurn(int push_every, bool resident) {
  TrainerOptions o;
  o.loop.batch_size = 16;
  o.loop.max_steps = 12;
  o.loop.log_every = 0;
  o.push_every = push_every;
  o.compute_while_pushing = false;
  o.overlap_pulls = false;
  o.resident_model = resident;
  return o;
}

class ResidentTrainerTest
    : public ::testing::TestWithParam<std::tuple<PushEncoding, int>> {};

TEST_P(ResidentTrainerTest, SendsTheSamePushesAsHostGradients) {
  const auto [encoding, push_every] = GetParam();
  const RunResult host = Train(encoding, InTurn(push_every, false));
  const RunResult resident = Train(encoding, InTurn(push_every, true));
  ASSERT_TRUE(host.result.ok()) << host.result.status();
  ASSERT_TRUE(resident.result.ok()) << resident.result.status();
  EXPECT_EQ(resident.result->pushes, host.result->pushes);
  EXPECT_EQ(host.result->pushes, 12 / push_every);
  ASSERT_EQ(resident.model.size(), host.model.size());
  int64_t differ = 0;
  for (size_t i = 0; i < host.model.size(); ++i) {
    differ += resident.model[i] != host.model[i];
  }
  EXPECT_EQ(differ, 0) << "of " << host.model.size() << " weights";
  // And the run did move the model.
  const std::vector<float> initial = InitialParams(ToyModel("dnn"), 1);
  EXPECT_NE(host.model, initial);
  // A bfloat16 push of the resident worker was rounded by its backend, a
  // top-k push selected there.
  EXPECT_EQ(resident.backend->bf16_takes,
            encoding == PushEncoding::kBfloat16 ? 12 / push_every : 0);
  EXPECT_EQ(resident.backend->top_k_takes,
            encoding == PushEncoding::kTopK ? 12 / push_every : 0);
  EXPECT_EQ(host.backend->bf16_takes + host.backend->top_k_takes, 0);
}

INSTANTIATE_TEST_SUITE_P(
    EncodingsAndPushEvery, ResidentTrainerTest,
    ::testing::Combine(::testing::Values(PushEncoding::kFloat32,
                                         PushEncoding::kBfloat16,
                                         PushEncoding::kOneBit,
                                         PushEncoding::kTopK),
                       ::testing::Values(1, 3)),
    [](const auto& info) {
      return absl::StrCat(PushEncodingName(std::get<0>(info.param)), "Every",
                          std::get<1>(info.param));
    });

// Models loaded from the backend's mirror of the copies: the same pushes,
// so the same servers' model, as models uploaded from host memory; every
// model after the first (which comes as weights) is loaded from the mirror.
// The mirrored models come down into host memory only for the evaluations
// (every 4 steps), which see the same models as the plain run's.
TEST(ResidentTrainerMirrorTest, ModelsFromTheCopiesGiveTheSamePushes) {
  const int64_t n = ModelParamCount(ToyModel("dnn"));
  for (int push_every : {1, 3}) {
    SCOPED_TRACE(push_every);
    TrainerOptions o = InTurn(push_every, true);
    o.loop.eval_every = 4;
    const RunResult plain = Train(PushEncoding::kOneBit, o);
    const RunResult mirrored =
        Train(PushEncoding::kOneBit, o, /*copies_on_backend=*/true);
    ASSERT_TRUE(plain.result.ok()) << plain.result.status();
    ASSERT_TRUE(mirrored.result.ok()) << mirrored.result.status();
    EXPECT_EQ(plain.backend->mirrored_loads, 0);
    const int models = 12 / push_every;  // one per push, and the first
    EXPECT_EQ(mirrored.backend->mirrored_loads, models - 1);
    EXPECT_EQ(mirrored.backend->loads.size(), static_cast<size_t>(models));
    EXPECT_EQ(mirrored.backend->loads_from_pinned, 1);  // the first
    EXPECT_EQ(plain.backend->loads_from_pinned, models);
    ASSERT_EQ(mirrored.model.size(), plain.model.size());
    int64_t differ = 0;
    for (size_t i = 0; i < plain.model.size(); ++i) {
      differ += mirrored.model[i] != plain.model[i];
    }
    EXPECT_EQ(differ, 0) << "of " << plain.model.size() << " weights";
    // Evaluations after steps 4, 8 and 12, then the final one (a plain
    // pull): each of the three periodic ones downloaded the model once.
    EXPECT_EQ(plain.backend->downloaded, 0);
    EXPECT_EQ(mirrored.backend->downloaded, 3 * n);
    EXPECT_EQ(mirrored.backend->evaluated.size(), 4u);
    EXPECT_TRUE(mirrored.backend->evaluated == plain.backend->evaluated);
  }
}

// Pulls that come partly as weights (server 1) and partly from the copies
// (server 0, as updates replayed there): the copies' slice comes down from
// the mirror before each such model is uploaded, so the pushes are again
// those of a plain run.
TEST(ResidentTrainerMirrorTest, PullsPartlyAsWeightsLoadTheWholeModel) {
  const RunResult plain =
      Train(PushEncoding::kOneBit, InTurn(1, true), false, true);
  const RunResult mixed = Train(PushEncoding::kOneBit, InTurn(1, true),
                                /*copies_on_backend=*/true,
                                /*weights_from_server1=*/true);
  ASSERT_TRUE(plain.result.ok()) << plain.result.status();
  ASSERT_TRUE(mixed.result.ok()) << mixed.result.status();
  // Server 0 answered every pull after the first (the final one too) with
  // updates, so the buffer's copy of its slice was not written by the pull.
  EXPECT_EQ(mixed.pulls.update_pulls, 12);
  EXPECT_EQ(mixed.backend->mirrored_loads, 0);
  EXPECT_EQ(mixed.backend->loads.size(), 12u);
  // Server 0's slice, once for each of the 11 models after the first.
  const int64_t n = ModelParamCount(ToyModel("dnn"));
  EXPECT_GT(mixed.backend->downloaded, 0);
  EXPECT_LT(mixed.backend->downloaded, 11 * n);
  EXPECT_EQ(mixed.backend->downloaded % 11, 0);
  EXPECT_EQ(mixed.model, plain.model);
  EXPECT_NE(plain.model, InitialParams(ToyModel("dnn"), 1));
}

// Without evaluations a mirrored model never comes down to host memory.
TEST(ResidentTrainerMirrorTest, TrainingAloneDownloadsNothing) {
  const RunResult run = Train(PushEncoding::kOneBit, InTurn(1, true),
                              /*copies_on_backend=*/true);
  ASSERT_TRUE(run.result.ok()) << run.result.status();
  EXPECT_EQ(run.backend->mirrored_loads, 11);
  EXPECT_EQ(run.backend->downloaded, 0);
}

TEST(ResidentTrainerMirrorTest, LearnsTheToyTaskWithBackgroundPullsToo) {
  TrainerOptions o = InTurn(2, true);
  o.loop.max_steps = 0;
  o.loop.epochs = 3;
  o.compute_while_pushing = true;
  o.overlap_pulls = true;
  const RunResult run =
      Train(PushEncoding::kOneBit, o, /*copies_on_backend=*/true);
  ASSERT_TRUE(run.result.ok()) << run.result.status();
  EXPECT_GT(run.result->heldout_accuracy, 0.8);
  // Models pulled by the prefetcher into its buffer come from the mirror
  // too: most loads are mirrored, the others read a pinned buffer.
  const int loads = static_cast<int>(run.backend->loads.size());
  EXPECT_GT(run.backend->mirrored_loads, loads / 2);
  EXPECT_EQ(run.backend->loads_from_pinned,
            loads - run.backend->mirrored_loads);
}

TEST(ResidentTrainerBackgroundTest, LearnsTheToyTaskWithBackgroundPushes) {
  TrainerOptions o = InTurn(2, true);
  o.loop.max_steps = 0;
  o.loop.epochs = 3;
  o.compute_while_pushing = true;
  o.overlap_pulls = true;
  const RunResult run = Train(PushEncoding::kOneBit, o);
  const RecordingBackend* backend = run.backend.get();
  ASSERT_TRUE(run.result.ok()) << run.result.status();
  EXPECT_GT(run.result->pushes, 0);
  EXPECT_GT(run.result->heldout_accuracy, 0.8);
  // Both model buffers (the held one and the prefetcher's) were pinned,
  // every model was loaded from one of them, and both were unpinned before
  // the prefetcher's went.
  EXPECT_EQ(backend->pins, 2);
  EXPECT_TRUE(backend->pinned.empty());
  EXPECT_GT(backend->loads.size(), 2u);
  EXPECT_EQ(backend->loads_from_pinned,
            static_cast<int>(backend->loads.size()));
  EXPECT_EQ(std::set<const float*>(backend->loads.begin(),
                                   backend->loads.end())
                .size(),
            2u);
}

}  // namespace
}  // namespace asgd
