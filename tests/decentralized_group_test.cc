// Groups of decentralized workers on a small synthetic task, in one process
// talking over real gRPC (127.0.0.1, port 0): every variant learns,
// allreduce keeps the workers bitwise equal, and a dead or hung neighbour
// does not stop a worker (and shows in its metrics).

#include <cstring>
#include <iostream>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "common/metrics_testing.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "model/cpu_backend.h"
#include "model/model_spec.h"
#include "prometheus/registry.h"
#include "proto/peer.grpc.pb.h"
#include "worker/data/frame_examples.h"
#include "worker/data/make_examples.h"
#include "worker/data/toy_task.h"
#include "worker/data/utterances.h"
#include "worker/peer/decentralized_metrics.h"
#include "worker/peer/decentralized_trainer.h"
#include "worker/peer/peer_grpc_client.h"
#include "worker/peer/peer_grpc_service.h"

namespace asgd {
namespace {

ModelSpec SmallSpec() { return ToyModel("dnn"); }

ModelLayout LayoutOf(const ModelSpec& spec) {
  return *ModelLayout::Create(ModelTensors(spec), 1, 1);
}

const ModelLayout& Layout() {
  static const ModelLayout* layout = new ModelLayout(LayoutOf(SmallSpec()));
  return *layout;
}

PeerGroup GroupOf(int i, int n, DecentralizedMode mode, Topology topology,
                  const ModelLayout& layout = Layout()) {
  PeerGroup g;
  g.worker_index = i;
  g.num_workers = n;
  g.layout_fingerprint = layout.Fingerprint();
  g.mode = DecentralizedModeName(mode);
  if (mode == DecentralizedMode::kAdpsgd) {
    g.topology = TopologyName(topology);
    g.topology_seed = 1;
  }
  return g;
}

struct WorkerRun {
  absl::StatusOr<DecentralizedResult> result = absl::UnknownError("not run");
  std::string log;
  double accuracy = 0;
};

// `n` workers of a model of `kind`, each with its own part of the toy task,
// a PeerModel starting from the same initial weights, a peer server and a
// client; trains them concurrently.
std::vector<WorkerRun> TrainGroup(int n, const std::string& kind,
                                  DecentralizedOptions options) {
  const ModelSpec spec = ToyModel(kind);
  const ModelLayout layout = LayoutOf(spec);
  const std::vector<float> initial = InitialParams(spec, 1);
  std::vector<std::unique_ptr<PeerModel>> models;
  std::vector<std::unique_ptr<AllreduceMailbox>> mailboxes;
  std::vector<std::unique_ptr<PeerServer>> servers;
  std::vector<std::string> addresses;
  const bool adpsgd = options.mode == DecentralizedMode::kAdpsgd;
  for (int i = 0; i < n; ++i) {
    models.push_back(std::make_unique<PeerModel>(initial));
    mailboxes.push_back(
        std::make_unique<AllreduceMailbox>(i, n, layout.total_size()));
    PeerServerOptions o;
    o.host = "127.0.0.1";
    o.group = GroupOf(i, n, options.mode, options.adpsgd.topology, layout);
    auto server =
        PeerServer::Start(o, &layout, adpsgd ? models[i].get() : nullptr,
                          adpsgd ? nullptr : mailboxes[i].get(), nullptr);
    EXPECT_TRUE(server.ok()) << server.status();
    addresses.push_back(absl::StrCat("127.0.0.1:", (*server)->port()));
    servers.push_back(*std::move(server));
  }
  const Utterances heldout_utts = ToyUtterances(1, 0, 1, 24, 0.5f, 1.0f);
  auto heldout = MakeExamples(spec, &heldout_utts, ToyDataOptions());
  EXPECT_TRUE(heldout.ok()) << heldout.status();
  std::vector<WorkerRun> runs(n);
  std::vector<std::thread> threads;
  for (int i = 0; i < n; ++i) {
    threads.emplace_back([&, i] {
      GrpcPeerClientOptions co;
      co.group = GroupOf(i, n, options.mode, options.adpsgd.topology, layout);
      co.connect_timeout = absl::Seconds(20);
      co.average_timeout = absl::Seconds(20);
      auto client = GrpcPeerClient::Create(addresses, &layout, co);
      if (!client.ok()) {
        runs[i].result = client.status();
        return;
      }
      const Utterances utts = ToyUtterances(1, i, n, 24, 0.5f, 1.0f);
      auto train = MakeExamples(spec, &utts, ToyDataOptions());
      if (!train.ok()) {
        runs[i].result = train.status();
        return;
      }
      const BatchShape shape = ShapeOfBatch(**train, options.loop.batch_size);
      auto dnn = CreateCpuBackend(spec, shape.rows());
      DecentralizedOptions mine = options;
      mine.loop.worker_index = i;
      std::ostringstream log;
      DecentralizedTrainer trainer(models[i].get(), client->get(),
                                   mailboxes[i].get(), dnn->get(), train->get(),
                                   heldout->get(), mine, &log);
      runs[i].result = trainer.Run();
      servers[i]->MarkDone(0);
      (*client)->AwaitPeersDone(absl::Seconds(30));
      runs[i].log = log.str();
      std::vector<float> params(layout.total_size());
      models[i]->Read(absl::MakeSpan(params));
      runs[i].accuracy =
          *EvaluateAccuracy(dnn->get(), params, **heldout, shape.examples);
    });
  }
  for (auto& t : threads) t.join();
  return runs;
}

LoopOptions Steps(int64_t steps) {
  LoopOptions o;
  o.batch_size = 32;
  o.max_steps = steps;
  o.epochs = 0;
  o.log_every = 100;
  o.eval_every = 100;
  return o;
}

struct Variant {
  std::string name;
  DecentralizedMode mode;
  Topology topology;
  bool delay_by_one;
  int workers;
  std::string kind = "dnn";
};

class DecentralizedLearningTest : public ::testing::TestWithParam<Variant> {};

TEST_P(DecentralizedLearningTest, LearnsTheTask) {
  const Variant& v = GetParam();
  DecentralizedOptions options;
  options.loop = Steps(300);
  options.mode = v.mode;
  options.adpsgd.topology = v.topology;
  options.delay_by_one = v.delay_by_one;
  options.learning_rate = 0.1f;
  std::vector<WorkerRun> runs = TrainGroup(v.workers, v.kind, options);
  for (int i = 0; i < v.workers; ++i) {
    ASSERT_TRUE(runs[i].result.ok()) << runs[i].result.status();
    const DecentralizedResult& r = *runs[i].result;
    EXPECT_EQ(r.train.steps, 300);
    // 32 frames per minibatch, or 3 chunks of 10 labelled frames.
    EXPECT_EQ(r.train.frames, 300 * (ToyModel(v.kind).is_sequence() ? 30 : 32));
    std::cout << v.name << " worker " << i << " accuracy " << runs[i].accuracy
              << "\n";
    EXPECT_GT(runs[i].accuracy, 0.8) << "worker " << i << "\n" << runs[i].log;
    EXPECT_NE(runs[i].log.find(absl::StrCat("worker ", i, " step 300")),
              std::string::npos)
        << runs[i].log;
    if (v.mode == DecentralizedMode::kAdpsgd) {
      EXPECT_EQ(r.averages.failed + r.averages.skipped, 0);
      if (r.averages.ok > 0) {
        EXPECT_GE(r.averages.last_distance, 0);
      }
    } else {
      EXPECT_EQ(r.allreduces, 300);
    }
  }
  if (v.mode == DecentralizedMode::kAllreduce) {
    for (int i = 1; i < v.workers; ++i) {
      const auto& a = runs[0].result->train.params;
      const auto& b = runs[i].result->train.params;
      ASSERT_EQ(a.size(), b.size());
      EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0)
          << "worker " << i << " differs from worker 0";
    }
  } else if (v.workers == 2 && v.topology == Topology::kFixedRing) {
    // Worker 0 starts one exchange per step; worker 1 none.
    EXPECT_EQ(runs[0].result->averages.ok, 300);
    EXPECT_EQ(runs[1].result->averages.ok, 0);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Variants, DecentralizedLearningTest,
    ::testing::Values(
        Variant{"FixedRing2", DecentralizedMode::kAdpsgd, Topology::kFixedRing,
                false, 2},
        Variant{"FixedRing3", DecentralizedMode::kAdpsgd, Topology::kFixedRing,
                false, 3},
        Variant{"RandomRing4", DecentralizedMode::kAdpsgd,
                Topology::kRandomRing, false, 4},
        Variant{"RandomRing3DelayByOne", DecentralizedMode::kAdpsgd,
                Topology::kRandomRing, true, 3},
        Variant{"FixedRing4DelayByOne", DecentralizedMode::kAdpsgd,
                Topology::kFixedRing, true, 4},
        Variant{"Allreduce3", DecentralizedMode::kAllreduce,
                Topology::kFixedRing, false, 3},
        Variant{"LstmFixedRing2", DecentralizedMode::kAdpsgd,
                Topology::kFixedRing, false, 2, "lstm"},
        Variant{"BlstmRandomRing3DelayByOne", DecentralizedMode::kAdpsgd,
                Topology::kRandomRing, true, 3, "blstm"},
        Variant{"CnnAllreduce2", DecentralizedMode::kAllreduce,
                Topology::kFixedRing, false, 2, "cnn"},
        Variant{"BlstmAllreduce2", DecentralizedMode::kAllreduce,
                Topology::kFixedRing, false, 2, "blstm"}),
    [](const ::testing::TestParamInfo<Variant>& info) {
      return info.param.name;
    });

// A peer service that accepts an averaging exchange and never answers
// (a stopped process): calls end at the caller's deadline.
class HangingPeer final : public asgd::v1::Peer::CallbackService {
 public:
  explicit HangingPeer(PeerGroup group) : group_(std::move(group)) {}

  grpc::ServerUnaryReactor* Describe(grpc::CallbackServerContext* context,
                                     const asgd::v1::PeerHello*,
                                     asgd::v1::PeerHello* reply) override {
    *reply = ToHello(group_);
    auto* reactor = context->DefaultReactor();
    reactor->Finish(grpc::Status::OK);
    return reactor;
  }

  // Never answers either: the caller's deadline ends the call.
  grpc::ServerUnaryReactor* AwaitDone(grpc::CallbackServerContext*,
                                      const asgd::v1::AwaitDoneRequest*,
                                      asgd::v1::AwaitDoneReply*) override {
    class Reactor : public grpc::ServerUnaryReactor {
     public:
      void OnCancel() override {
        Finish(grpc::Status(grpc::StatusCode::CANCELLED, "gave up"));
      }
      void OnDone() override { delete this; }
    };
    return new Reactor();
  }

  grpc::ServerBidiReactor<asgd::v1::PeerMessage, asgd::v1::PeerMessage>*
  Average(grpc::CallbackServerContext*) override {
    class Reactor : public grpc::ServerBidiReactor<asgd::v1::PeerMessage,
                                                   asgd::v1::PeerMessage> {
     public:
      Reactor() { StartRead(&msg_); }
      void OnReadDone(bool ok) override {
        if (ok) StartRead(&msg_);
      }
      void OnCancel() override {
        Finish(grpc::Status(grpc::StatusCode::CANCELLED, "gave up"));
      }
      void OnDone() override { delete this; }

     private:
      asgd::v1::PeerMessage msg_;
    };
    return new Reactor();
  }

 private:
  const PeerGroup group_;
};

class DeadNeighbourTest : public ::testing::TestWithParam<bool> {};

TEST_P(DeadNeighbourTest, WorkerKeepsTrainingWithinADeadline) {
  const bool hung = GetParam();
  const ModelLayout& layout = Layout();
  const Utterances utts = ToyUtterances(3, 0, 2, 24, 0.5f, 1.0f);
  FrameExamples train(&utts, 1);
  const std::vector<float> initial = InitialParams(SmallSpec(), 1);
  PeerModel model(initial);
  const PeerGroup mine =
      GroupOf(0, 2, DecentralizedMode::kAdpsgd, Topology::kFixedRing);
  const PeerGroup theirs =
      GroupOf(1, 2, DecentralizedMode::kAdpsgd, Topology::kFixedRing);

  // Worker 1: a real peer server that is stopped once the group has formed,
  // or one that hangs on every exchange.
  PeerModel neighbour_model(initial);
  std::unique_ptr<PeerServer> neighbour;
  HangingPeer hanging(theirs);
  std::unique_ptr<grpc::Server> hanging_server;
  int port = 0;
  if (hung) {
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(),
                             &port);
    builder.RegisterService(&hanging);
    hanging_server = builder.BuildAndStart();
    ASSERT_NE(hanging_server, nullptr);
  } else {
    PeerServerOptions o;
    o.host = "127.0.0.1";
    o.group = theirs;
    auto server =
        PeerServer::Start(o, &layout, &neighbour_model, nullptr, nullptr);
    ASSERT_TRUE(server.ok()) << server.status();
    neighbour = *std::move(server);
    port = neighbour->port();
  }
  GrpcPeerClientOptions co;
  co.group = mine;
  co.connect_timeout = absl::Seconds(10);
  co.average_timeout = absl::Milliseconds(200);
  auto client = GrpcPeerClient::Create(
      {"127.0.0.1:1", absl::StrCat("127.0.0.1:", port)}, &layout, co);
  ASSERT_TRUE(client.ok()) << client.status();
  if (!hung) neighbour->Shutdown();  // the neighbour dies

  prometheus::Registry registry;
  DecentralizedMetrics metrics(registry, 0);
  DecentralizedOptions options;
  options.loop = Steps(400);
  options.loop.slowdown = 2;  // steps long enough for several back-off rounds
  options.learning_rate = 0.1f;
  options.adpsgd.backoff_initial = absl::Milliseconds(20);
  options.adpsgd.backoff_max = absl::Milliseconds(200);
  options.peer_observer = &metrics;
  auto dnn = CreateCpuBackend(SmallSpec(), 32);
  std::ostringstream log;
  DecentralizedTrainer trainer(&model, client->get(), nullptr, dnn->get(),
                               &train, nullptr, options, &log);
  const absl::Time start = absl::Now();
  auto result = trainer.Run();
  const absl::Duration took = absl::Now() - start;
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->train.steps, 400);
  EXPECT_LT(took, absl::Seconds(30));
  const AverageStats& a = result->averages;
  EXPECT_EQ(a.ok, 0);
  EXPECT_GE(a.failed, 1);
  EXPECT_EQ(a.ok + a.failed + a.skipped, 400);
  // Back-off: far fewer tries than steps, each costing at most the deadline.
  EXPECT_LT(a.failed, 100);
  EXPECT_NE(log.str().find("averaging with worker 1 failed"), std::string::npos)
      << log.str();
  EXPECT_EQ(MetricValue(registry, "asgd_worker_peer_averages_total", "result",
                        "failed"),
            a.failed);
  EXPECT_EQ(MetricValue(registry, "asgd_worker_peer_averages_total", "result",
                        "skipped"),
            a.skipped);
  EXPECT_EQ(
      MetricValue(registry, "asgd_worker_peer_averages_total", "result", "ok"),
      0);
  // The barrier does not wait for a worker that is gone; a hung one is
  // reported at the deadline.
  const absl::Time barrier = absl::Now();
  const std::vector<int> missing =
      (*client)->AwaitPeersDone(absl::Milliseconds(300));
  EXPECT_LT(absl::Now() - barrier, absl::Seconds(10));
  EXPECT_EQ(missing, hung ? std::vector<int>{1} : std::vector<int>{});
  if (hanging_server) {
    hanging_server->Shutdown(absl::ToChronoTime(absl::Now()));
  }
}

INSTANTIATE_TEST_SUITE_P(DeadOrHung, DeadNeighbourTest, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return info.param ? std::string("Hung")
                                             : std::string("Dead");
                         });

}  // namespace
}  // namespace asgd
