// Training from a Kaldi recipe's layout, end to end in one process: the
// generated test corpus written as Kaldi data directories with compressed
// features (corpus_to_kaldi's export), a pool of 2 servers on port 0, and 2
// workers streaming their parts of the data directory (a memory budget
// small enough for several windows per epoch) with per-speaker CMVN; the
// held-out directory is loaded whole. The pool's model must learn the
// corpus, a DNN and a BLSTM alike; the shared minibatch pool trains from the
// data directory loaded whole.
#include <memory>
#include <sstream>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "corpus/corpus_io.h"
#include "gtest/gtest.h"
#include "kaldi/corpus_export.h"
#include "model/cpu_backend.h"
#include "model/model_spec.h"
#include "server/grpc_server.h"
#include "tests/test_corpus.h"
#include "tests/test_pool.h"
#include "worker/data/kaldi_data.h"
#include "worker/ps/connect.h"
#include "worker/ps/trainer.h"

namespace asgd {
namespace {

class KaldiEndToEndTest : public ::testing::TestWithParam<std::string> {
 protected:
  // Generating forks child processes: do it before any gRPC thread exists.
  static void SetUpTestSuite() {
    auto dir = GenerateTestCorpus("kaldi_e2e_corpus");
    ASSERT_TRUE(dir.ok()) << dir.status();
    kaldi::CorpusExportOptions o;
    o.corpus_dir = *dir;
    o.out_dir = *dir + "-kaldi";
    o.feature_format = kaldi::MatrixFormat::kCompressedAuto;
    auto summary = kaldi::ExportCorpusToKaldi(o);
    ASSERT_TRUE(summary.ok()) << summary.status();
    kaldi_dir_ = new std::string(o.out_dir);
    std::cout << "Kaldi data: train " << summary->train.utterances
              << " utterances, " << summary->train.frames << " frames, "
              << summary->train.feature_bytes << " bytes of compressed features\n";
  }
  static void TearDownTestSuite() { delete kaldi_dir_; }

  static KaldiInput Train() {
    KaldiInput in;
    in.data_dir = *kaldi_dir_ + "/train";
    in.alignments = *kaldi_dir_ + "/train/pdf.ark";
    in.memory_bytes = int64_t{8} << 20;  // windows of 4 MiB: several per epoch
    in.temp_dir = ::testing::TempDir();
    return in;
  }
  static KaldiInput Heldout() {
    KaldiInput in = Train();
    in.data_dir = *kaldi_dir_ + "/heldout";
    in.alignments = *kaldi_dir_ + "/heldout/pdf.ark";
    return in;
  }

  static std::string* kaldi_dir_;
};
std::string* KaldiEndToEndTest::kaldi_dir_ = nullptr;

ModelSpec SpecFor(const std::string& kind) {
  ModelSpec spec;
  spec.feature_dim = 40;
  spec.num_classes = 40;
  if (kind == "blstm") {
    spec.context = 0;
    LstmLayerSpec l;
    l.cells = 48;
    l.bidirectional = true;
    spec.layers = {LayerSpec::Lstm(l)};
  } else {
    spec.context = 5;
    spec.layers = {LayerSpec::Dense(256, Activation::kRelu)};
  }
  return spec;
}

TEST_P(KaldiEndToEndTest, TwoWorkersStreamTheirPartsAndLearn) {
  const ModelSpec spec = SpecFor(GetParam());
  const bool sequence = spec.is_sequence();
  auto pool = StartTestPool(spec, 2, 2, sequence ? 0.2f : 0.05f);
  ASSERT_TRUE(pool.ok()) << pool.status();
  const int kWorkers = 2;
  std::vector<absl::StatusOr<TrainResult>> results(kWorkers);
  std::vector<std::ostringstream> logs(kWorkers);
  std::vector<std::thread> threads;
  for (int w = 0; w < kWorkers; ++w) {
    threads.emplace_back([&, w] {
      PoolClientOptions co;
      co.worker_id = w;
      auto client = ConnectToPool(pool->addresses, co);
      if (!client.ok()) {
        results[w] = client.status();
        return;
      }
      auto data = PrepareKaldiWorkerData(Train(), Heldout(), (*client)->model(),
                                         {}, w, kWorkers, /*shared_pool=*/false);
      if (!data.ok()) {
        results[w] = data.status();
        return;
      }
      logs[w] << data->summary << "\n";
      const BatchShape shape = ShapeOfBatch(*data->train, 128);
      auto backend = CreateCpuBackend(spec, shape.rows());
      TrainerOptions to;
      to.loop.worker_index = w;
      to.loop.batch_size = 128;
      to.loop.epochs = sequence ? 3 : 6;
      to.loop.log_every = 50;
      to.open_source = data->open_source;
      Trainer trainer(client->get(), backend->get(), data->train.get(),
                      data->heldout.get(), to, &logs[w]);
      results[w] = trainer.Run();
    });
  }
  for (auto& t : threads) t.join();
  for (int w = 0; w < kWorkers; ++w) {
    std::cout << logs[w].str();
    ASSERT_TRUE(results[w].ok()) << results[w].status();
  }
  // The pool's final model on the held-out directory.
  auto heldout = LoadKaldiUtterances(Heldout(), 0, 1, int64_t{1} << 30);
  ASSERT_TRUE(heldout.ok()) << heldout.status();
  auto examples = MakeExamples(spec, heldout->utterances.get(), {});
  ASSERT_TRUE(examples.ok());
  auto client = ConnectToPool(pool->addresses, {});
  ASSERT_TRUE(client.ok());
  std::vector<float> params((*client)->layout().total_size());
  std::vector<uint64_t> versions;
  ASSERT_TRUE((*client)->Pull(absl::MakeSpan(params), &versions).ok());
  const BatchShape shape = ShapeOfBatch(**examples, 512);
  auto backend = CreateCpuBackend(spec, shape.rows());
  auto accuracy =
      EvaluateAccuracy(backend->get(), params, **examples, shape.examples);
  ASSERT_TRUE(accuracy.ok()) << accuracy.status();
  const double majority = heldout->utterances->MajorityClassRate();
  std::cout << GetParam() << " held-out frame accuracy " << 100 * *accuracy
            << "% (majority class " << 100 * majority << "%)\n";
  RecordProperty("heldout_accuracy", std::to_string(*accuracy));
  EXPECT_GT(*accuracy, 0.35);
  EXPECT_GT(*accuracy, majority + 0.15);
}

INSTANTIATE_TEST_SUITE_P(Models, KaldiEndToEndTest,
                         ::testing::Values("dnn", "blstm"));

// The shared minibatch pool needs every example at hand: the data directory
// is loaded whole on each worker, and the pool hands out its batches.
TEST_F(KaldiEndToEndTest, SharedPoolTrainsFromTheDirectoryLoadedWhole) {
  const ModelSpec spec = SpecFor("dnn");
  auto pool = StartTestPool(spec, 1, 2, 0.05f);
  ASSERT_TRUE(pool.ok()) << pool.status();
  KaldiInput train = Train();
  train.memory_bytes = int64_t{64} << 20;
  auto data = PrepareKaldiWorkerData(train, Heldout(), spec, {}, 0, 1,
                                     /*shared_pool=*/true);
  ASSERT_TRUE(data.ok()) << data.status();
  EXPECT_EQ(data->train->num_examples(), data->all_frames);
  auto client = ConnectToPool(pool->addresses, {});
  ASSERT_TRUE(client.ok());
  const BatchShape shape = ShapeOfBatch(*data->train, 128);
  auto backend = CreateCpuBackend(spec, shape.rows());
  TrainerOptions to;
  to.loop.batch_size = 128;
  to.loop.epochs = 2;
  to.loop.log_every = 0;
  to.use_pool = true;
  to.pool_run_id = "kaldi-e2e-test-run-0123456789abc";
  Trainer trainer(client->get(), backend->get(), data->train.get(),
                  data->heldout.get(), to, nullptr);
  auto result = trainer.Run();
  ASSERT_TRUE(result.ok()) << result.status();
  // Every whole batch of both epochs (a pool epoch has floor(frames / 128)).
  EXPECT_EQ(result->frames, 2 * (data->all_frames / 128) * 128);
  EXPECT_GT(result->heldout_accuracy,
            data->heldout_utts->MajorityClassRate() + 0.1);
}

}  // namespace
}  // namespace asgd
