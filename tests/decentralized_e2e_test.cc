// Decentralized training end to end in one process: a generated tiny corpus,
// a pool of 2 parameter servers on port 0 (the initial model, and where
// worker 0 hands the final one), and 2-4 workers that find each other through
// their peer ports and train with AD-PSGD (fixed ring, random ring,
// delay-by-one) or ring allreduce over real gRPC. The model on the servers
// after the run must clearly beat chance and the majority-class baseline,
// like the parameter-server end-to-end test.
#include <iostream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "model/model_spec.h"
#include "corpus/corpus_io.h"
#include "gtest/gtest.h"
#include "tests/test_corpus.h"
#include "tests/test_pool.h"
#include "server/grpc_server.h"
#include "tests/test_worker.h"
#include "worker/loop/loop.h"
#include "worker/peer/decentralized_worker.h"
#include "worker/ps/connect.h"

namespace asgd {
namespace {

// Where in-process workers publish their peer ports: each waits until all
// have (the role of --peer_port_file and --peers_file in a script).
class PeerDirectory {
 public:
  explicit PeerDirectory(int n) : ports_(n, 0) {}

  absl::StatusOr<std::vector<std::string>> Register(int index, int port) {
    absl::MutexLock lock(&mu_);
    ports_[index] = port;
    ++registered_;
    auto all = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return registered_ == static_cast<int>(ports_.size());
    };
    if (!mu_.AwaitWithTimeout(absl::Condition(&all), absl::Seconds(120))) {
      return absl::DeadlineExceededError("not every worker registered");
    }
    std::vector<std::string> addresses;
    for (int p : ports_) addresses.push_back(absl::StrCat("127.0.0.1:", p));
    return addresses;
  }

 private:
  absl::Mutex mu_;
  std::vector<int> ports_ ABSL_GUARDED_BY(mu_);
  int registered_ ABSL_GUARDED_BY(mu_) = 0;
};

struct Variant {
  std::string name;
  DecentralizedMode mode;
  Topology topology;
  bool delay_by_one;
  int workers;
};

class DecentralizedEndToEndTest : public ::testing::TestWithParam<Variant> {
 protected:
  // Generating forks child processes: do it before any gRPC thread exists.
  static void SetUpTestSuite() {
    auto dir = GenerateTestCorpus("decentralized_e2e_corpus");
    ASSERT_TRUE(dir.ok()) << dir.status();
    corpus_dir_ = new std::string(*dir);
  }
  static void TearDownTestSuite() { delete corpus_dir_; }

  static std::string* corpus_dir_;
};
std::string* DecentralizedEndToEndTest::corpus_dir_ = nullptr;

TEST_P(DecentralizedEndToEndTest, WorkersLearnTheCorpusTogether) {
  const Variant& v = GetParam();
  auto corpus = corpus::LoadCorpus(*corpus_dir_);
  ASSERT_TRUE(corpus.ok()) << corpus.status();
  ModelSpec spec;
  spec.feature_dim = corpus->info.feature_dim;
  spec.context = 5;
  spec.layers = {LayerSpec::Dense(256, Activation::kRelu)};
  spec.num_classes = corpus->info.num_classes;
  auto pool = StartTestPool(spec, /*num_servers=*/2, /*num_shards=*/1, 0.05f);
  ASSERT_TRUE(pool.ok()) << pool.status();
  std::vector<std::string> addresses = pool->addresses;

  const int n = v.workers;
  const double epochs = 4;
  PeerDirectory directory(n);
  std::vector<absl::StatusOr<DecentralizedWorkerResult>> results(
      n, absl::UnknownError("not run"));
  std::vector<std::ostringstream> logs(n);
  std::vector<std::thread> threads;
  for (int w = 0; w < n; ++w) {
    threads.emplace_back([&, w] {
      PoolClientOptions co;
      co.worker_id = w;
      auto client = ConnectToPool(addresses, co);
      if (!client.ok()) {
        results[w] = client.status();
        return;
      }
      auto data = MakeWorkerData(*corpus, spec, w, n, 128);
      if (!data.ok()) {
        results[w] = data.status();
        return;
      }
      DecentralizedWorkerOptions o;
      LoopOptions& loop = o.decentralized.loop;
      loop.worker_index = w;
      loop.batch_size = 128;
      loop.epochs = epochs;
      loop.log_every = 50;
      loop.eval_every = w == 0 ? 100 : 0;
      loop.eval_frames = 2000;
      if (v.mode == DecentralizedMode::kAllreduce) {
        o.local_learning_rate = 0.05f * n;  // as the sync baseline
        loop.max_steps = LockstepSteps(epochs, corpus->train_frames, n, 128);
        loop.epochs = 0;
      }
      o.decentralized.mode = v.mode;
      o.decentralized.delay_by_one = v.delay_by_one;
      o.decentralized.adpsgd.topology = v.topology;
      o.num_workers = n;
      o.peer_host = "127.0.0.1";
      o.peer_port = 0;
      o.connect_timeout = absl::Seconds(60);
      o.resolve_peers = [&directory, w](int port) {
        return directory.Register(w, port);
      };
      results[w] = RunDecentralizedWorker(o, client->get(), data->backend.get(),
                                          data->train.get(), data->heldout.get(),
                                          &logs[w]);
    });
  }
  for (auto& t : threads) t.join();

  for (int w = 0; w < n; ++w) {
    std::cout << logs[w].str();
    ASSERT_TRUE(results[w].ok())
        << "worker " << w << ": " << results[w].status();
    const DecentralizedWorkerResult& r = *results[w];
    EXPECT_GT(r.run.train.steps, 0);
    EXPECT_TRUE(r.unconfirmed.empty());
    EXPECT_GT(r.heldout_accuracy, 0.35) << "worker " << w;
    // The lines scripts/experiment_report.py reads.
    EXPECT_NE(logs[w].str().find(absl::StrCat("worker ", w, " done: ")),
              std::string::npos);
    if (v.mode == DecentralizedMode::kAdpsgd) {
      EXPECT_EQ(r.run.averages.failed + r.run.averages.skipped, 0);
      // Every worker took part in exchanges, started or answered.
      EXPECT_GT(r.run.averages.ok + r.averages_served, 0) << "worker " << w;
    } else {
      EXPECT_EQ(r.run.train.params, results[0]->run.train.params)
          << "allreduce workers must end bitwise equal; worker " << w;
    }
  }
  EXPECT_NE(logs[0].str().find("worker 0 eval t="), std::string::npos);

  // Worker 0 handed its final model to the servers: evaluate it there.
  auto client = ConnectToPool(addresses, {});
  ASSERT_TRUE(client.ok()) << client.status();
  std::vector<float> params((*client)->layout().total_size());
  std::vector<uint64_t> versions;
  ASSERT_TRUE((*client)->Pull(absl::MakeSpan(params), &versions).ok());
  EXPECT_EQ(params, results[0]->run.train.params);
  auto data = MakeWorkerData(*corpus, spec, 0, 1, 512);
  ASSERT_TRUE(data.ok()) << data.status();
  auto accuracy = EvaluateAccuracy(data->backend.get(), params, *data->heldout,
                                   data->shape.examples);
  ASSERT_TRUE(accuracy.ok()) << accuracy.status();
  const double majority = data->heldout->MajorityClassRate();
  std::cout << v.name << ": held-out frame accuracy of the servers' model "
            << 100 * *accuracy << "% (majority class " << 100 * majority
            << "%, chance " << 100.0 / spec.num_classes << "%)\n";
  RecordProperty("heldout_accuracy", std::to_string(*accuracy));
  EXPECT_GT(*accuracy, 0.35);
  EXPECT_GT(*accuracy, majority + 0.15);
}

INSTANTIATE_TEST_SUITE_P(
    Variants, DecentralizedEndToEndTest,
    ::testing::Values(Variant{"AdpsgdFixedRing3", DecentralizedMode::kAdpsgd,
                              Topology::kFixedRing, false, 3},
                      Variant{"AdpsgdRandomRing4", DecentralizedMode::kAdpsgd,
                              Topology::kRandomRing, false, 4},
                      Variant{"AdpsgdDelayByOne2", DecentralizedMode::kAdpsgd,
                              Topology::kFixedRing, true, 2},
                      Variant{"Allreduce3", DecentralizedMode::kAllreduce,
                              Topology::kFixedRing, false, 3}),
    [](const ::testing::TestParamInfo<Variant>& info) {
      return info.param.name;
    });

}  // namespace
}  // namespace asgd
