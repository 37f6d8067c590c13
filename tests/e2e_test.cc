// End to end in one process: a generated tiny corpus, a pool of 2 servers
// (2 shards each) on port 0, and 2 workers training concurrently through
// gRPC, with float32, bfloat16, 1-bit and top-k pushes (the 1-bit and top-k
// runs also pull in the background while they compute and push). The
// held-out frame accuracy must clearly beat chance and the
// always-majority-class baseline.
#include <memory>
#include <string>
#include <sstream>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "model/model_spec.h"
#include "common/wire_codec.h"
#include "corpus/corpus_io.h"
#include "gtest/gtest.h"
#include "tests/test_corpus.h"
#include "tests/test_pool.h"
#include "server/grpc_server.h"
#include "tests/test_worker.h"
#include "worker/ps/connect.h"
#include "worker/ps/trainer.h"

namespace asgd {
namespace {

struct Wire {
  WireDtype wire_dtype;
  PushEncoding push;
  bool overlap;  // background pushes and pulls
  std::string name;
};

class EndToEndTest : public ::testing::TestWithParam<Wire> {
 protected:
  // Generating forks child processes: do it before any gRPC thread exists.
  static void SetUpTestSuite() {
    auto dir = GenerateTestCorpus("e2e_corpus");
    ASSERT_TRUE(dir.ok()) << dir.status();
    corpus_dir_ = new std::string(*dir);
  }
  static void TearDownTestSuite() { delete corpus_dir_; }

  static std::string* corpus_dir_;
};
std::string* EndToEndTest::corpus_dir_ = nullptr;

TEST_P(EndToEndTest, TwoServersTwoWorkersLearnTheCorpus) {
  auto corpus = corpus::LoadCorpus(*corpus_dir_);
  ASSERT_TRUE(corpus.ok()) << corpus.status();

  ModelSpec spec;
  spec.feature_dim = corpus->info.feature_dim;
  spec.context = 5;
  spec.layers = {LayerSpec::Dense(256, Activation::kRelu)};
  spec.num_classes = corpus->info.num_classes;
  auto pool = StartTestPool(spec, /*num_servers=*/2, /*num_shards=*/2, 0.05f);
  ASSERT_TRUE(pool.ok()) << pool.status();
  std::vector<std::unique_ptr<GrpcServer>>& servers = pool->servers;
  std::vector<std::string> addresses = pool->addresses;
  // Addresses in reverse order: the client sorts the pool by server index.
  std::swap(addresses[0], addresses[1]);

  const int kWorkers = 2;
  std::vector<absl::StatusOr<TrainResult>> results(kWorkers);
  std::vector<std::ostringstream> logs(kWorkers);
  std::vector<std::thread> threads;
  for (int w = 0; w < kWorkers; ++w) {
    threads.emplace_back([&, w] {
      PoolClientOptions co;
      co.worker_id = w;
      co.wire_dtype = GetParam().wire_dtype;
      co.push_encoding = GetParam().push;
      auto client = ConnectToPool(addresses, co);
      if (!client.ok()) {
        results[w] = client.status();
        return;
      }
      auto data = MakeWorkerData(*corpus, (*client)->model(), w, kWorkers, 128);
      if (!data.ok()) {
        results[w] = data.status();
        return;
      }
      TrainerOptions to;
      to.loop.worker_index = w;
      to.loop.batch_size = 128;
      to.loop.epochs = 6;
      to.loop.log_every = 50;
      to.compute_while_pushing = GetParam().overlap;
      to.overlap_pulls = GetParam().overlap;
      Trainer trainer(client->get(), data->backend.get(), data->train.get(),
                      data->heldout.get(), to, &logs[w]);
      results[w] = trainer.Run();
    });
  }
  for (auto& t : threads) t.join();

  int64_t total_pushes = 0;
  for (int w = 0; w < kWorkers; ++w) {
    ASSERT_TRUE(results[w].ok()) << results[w].status();
    EXPECT_GT(results[w]->steps, 0);
    // One push per minibatch, or (background pushes) several minibatches
    // per push.
    EXPECT_LE(results[w]->pushes, results[w]->steps);
    if (!GetParam().overlap) {
      EXPECT_EQ(results[w]->pushes, results[w]->steps);
    }
    total_pushes += results[w]->pushes;
    std::cout << logs[w].str();
  }
  // Every push reached both servers and was applied exactly once.
  for (auto& server : servers) {
    EXPECT_EQ(server->store()->version(), static_cast<uint64_t>(total_pushes));
    const ParamStoreStats stats = server->store()->stats();
    EXPECT_EQ(stats.pushes_applied, static_cast<uint64_t>(total_pushes));
    for (uint64_t r : stats.rejected) EXPECT_EQ(r, 0u);
  }
  // The pool's final model, after every push of both workers.
  auto client = ConnectToPool(addresses, {});
  ASSERT_TRUE(client.ok()) << client.status();
  std::vector<float> params((*client)->layout().total_size());
  std::vector<uint64_t> versions;
  ASSERT_TRUE((*client)->Pull(absl::MakeSpan(params), &versions).ok());
  EXPECT_EQ(versions, std::vector<uint64_t>(2, total_pushes));
  auto data = MakeWorkerData(*corpus, spec, 0, 1, 512);
  ASSERT_TRUE(data.ok()) << data.status();
  auto accuracy = EvaluateAccuracy(data->backend.get(), params, *data->heldout,
                                   data->shape.examples);
  ASSERT_TRUE(accuracy.ok()) << accuracy.status();
  const double acc = *accuracy;
  const double majority = data->heldout->MajorityClassRate();
  std::cout << "held-out frame accuracy " << 100 * acc << "% (majority class "
            << 100 * majority << "%, chance " << 100.0 / spec.num_classes
            << "%)\n";
  RecordProperty("heldout_accuracy", std::to_string(acc));
  EXPECT_GT(acc, 0.35);
  EXPECT_GT(acc, majority + 0.15);
}

INSTANTIATE_TEST_SUITE_P(
    WireFormats, EndToEndTest,
    ::testing::Values(
        Wire{WireDtype::kFloat32, PushEncoding::kFloat32, false, "fp32"},
        Wire{WireDtype::kBfloat16, PushEncoding::kBfloat16, false, "bf16"},
        Wire{WireDtype::kFloat32, PushEncoding::kOneBit, true, "onebit"},
        Wire{WireDtype::kBfloat16, PushEncoding::kTopK, true, "topk"}),
    [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace asgd
