// Delta pulls against real servers on port 0: the worker's client asks for
// the updates since its exact copy, replays them with the server's
// arithmetic (on the pulling thread, or in parts over several), and must end
// bit for bit equal to the servers' weights, with 1-bit and top-k pushes,
// weight decay, a learning-rate schedule and staleness-scaled steps; it falls
// back to exact weights (a consistent base) or to plain weights when the log
// cannot serve it (float32 pushes, a log too small), and servers that cannot
// answer delta pulls refuse them with INVALID_ARGUMENT. Copies kept
// elsewhere (KeepExactCopiesOn: the device replay's pass, run on the host by
// CreateHostReplayCopy) end bit for bit the same.
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "model/cuda/host_replay_copy.h"
#include "proto/asgd.grpc.pb.h"
#include "server/grpc_server.h"
#include "server/model_options.h"
#include "tests/test_pool.h"
#include "worker/data/toy_task.h"
#include "worker/ps/grpc_param_client.h"

namespace asgd {
namespace {

struct PoolSettings {
  int num_servers = 2;
  OptimizerOptions optimizer;
  StalenessLrScale staleness_lr_scale = StalenessLrScale::kNone;
  int64_t delta_log_bytes = int64_t{64} << 20;
  // A pruned model: every third weight held at 0 (keep_).
  bool pruned = false;
};

class DeltaPullTest : public ::testing::Test {
 protected:
  void Start(const PoolSettings& settings) {
    // Rows of 64 and more: a 1-bit update is a few percent of the weights
    // (the toy model's rows of 4 would make it larger than they are).
    spec_ = ToyModel("dnn");
    spec_.feature_dim = 40;
    spec_.num_classes = 40;
    spec_.layers = {LayerSpec::Dense(64, Activation::kRelu),
                    LayerSpec::Dense(64, Activation::kRelu)};
    std::vector<float> initial = InitialParams(spec_, 1);
    if (settings.pruned) {
      keep_ = std::make_shared<std::vector<uint8_t>>(initial.size(), 1);
      for (size_t i = 0; i < initial.size(); i += 3) {
        (*keep_)[i] = 0;
        initial[i] = 0.0f;
      }
    }
    for (int s = 0; s < settings.num_servers; ++s) {
      ParamStoreOptions o;
      SetModel(spec_, &o);
      o.server_index = s;
      o.num_servers = settings.num_servers;
      o.num_shards = 2;
      o.optimizer = settings.optimizer;
      o.staleness_lr_scale = settings.staleness_lr_scale;
      o.delta_log_bytes = settings.delta_log_bytes;
      o.keep = keep_;
      auto server = GrpcServer::Start(o, initial, "127.0.0.1", 0, nullptr, {},
                                      nullptr, {});
      ASSERT_TRUE(server.ok()) << server.status();
      addresses_.push_back((*server)->local_address());
      servers_.push_back(*std::move(server));
    }
  }

  // `replay_threads`: 1 replays on the pulling thread, more in parts.
  std::unique_ptr<GrpcParamClient> Connect(PushEncoding encoding,
                                           uint64_t worker_id,
                                           int replay_threads = 1) {
    PoolClientOptions o;
    o.worker_id = worker_id;
    o.replay_threads = replay_threads;
    o.push_encoding = encoding;
    o.top_k_fraction = 0.05;
    o.connect_timeout = absl::Seconds(30);
    auto client = GrpcParamClient::Create(addresses_, o);
    EXPECT_TRUE(client.ok()) << client.status();
    return client.ok() ? *std::move(client) : nullptr;
  }

  std::vector<float> Model() { return PoolModel(servers_); }

  std::vector<float> Gradient(int64_t n, float scale) {
    return SineGradient(n, scale);
  }

  // Bitwise equality of two models (EXPECT_EQ on floats would accept
  // nothing less, but names the first differing element).
  static void ExpectBitEqual(const std::vector<float>& a,
                             const std::vector<float>& b,
                             const std::string& what) {
    ASSERT_EQ(a.size(), b.size());
    for (size_t i = 0; i < a.size(); ++i) {
      uint32_t x, y;
      std::memcpy(&x, &a[i], 4);
      std::memcpy(&y, &b[i], 4);
      ASSERT_EQ(x, y) << what << ": element " << i << " is " << a[i]
                      << ", the servers hold " << b[i];
    }
  }

  ModelSpec spec_;
  std::shared_ptr<std::vector<uint8_t>> keep_;  // a pruned model's mask
  std::vector<std::unique_ptr<GrpcServer>> servers_;
  std::vector<std::string> addresses_;
};

// Two workers push (1-bit and top-k) and pull in turn; one of them pushes
// from an older model, so steps are staleness-scaled; the step schedule
// changes the learning rate on the way, and weight decay is on. After every
// pull each worker's model is the servers' model, bit for bit: worker a
// replays on its pulling thread, worker b in 3 parts.
TEST_F(DeltaPullTest, ReplayedUpdatesAreExactlyTheServersModel) {
  PoolSettings settings;
  settings.optimizer.learning_rate = 0.3f;
  settings.optimizer.weight_decay = 0.01f;
  settings.optimizer.schedule = LrSchedule::kStep;
  settings.optimizer.step_size = 3;
  settings.optimizer.gamma = 0.5f;
  settings.staleness_lr_scale = StalenessLrScale::kInverse;
  Start(settings);
  auto a = Connect(PushEncoding::kOneBit, 1);
  auto b = Connect(PushEncoding::kTopK, 2, /*replay_threads=*/3);
  ASSERT_TRUE(a && b);
  ASSERT_TRUE(a->uses_delta_pulls());
  const int64_t n = a->layout().total_size();
  std::vector<float> pa(n), pb(n);
  std::vector<uint64_t> va, vb;
  ASSERT_TRUE(a->Pull(absl::MakeSpan(pa), &va).ok());
  ASSERT_TRUE(b->Pull(absl::MakeSpan(pb), &vb).ok());
  ExpectBitEqual(pa, Model(), "first pull");
  EXPECT_EQ(a->exact_weight_pulls(), 2);  // one base per server
  for (int step = 0; step < 10; ++step) {
    auto pushed = a->Push(Gradient(n, 0.1f + 0.01f * step), va, 1);
    ASSERT_TRUE(pushed.ok()) << pushed.status();
    // b pushes from its older model: staleness 1 or more.
    pushed = b->Push(Gradient(n, -0.2f + 0.02f * step), vb, 1);
    ASSERT_TRUE(pushed.ok()) << pushed.status();
    ASSERT_TRUE(a->Pull(absl::MakeSpan(pa), &va).ok());
    ExpectBitEqual(pa, Model(), absl::StrCat("worker a, step ", step));
    if (step % 2 == 1) {  // b pulls every other step: four updates behind
      ASSERT_TRUE(b->Pull(absl::MakeSpan(pb), &vb).ok());
      ExpectBitEqual(pb, Model(), absl::StrCat("worker b, step ", step));
    }
  }
  EXPECT_EQ(va[0], 20u);
  // Every pull after the first was updates only, on both servers.
  EXPECT_EQ(a->update_pulls(), 2 * 10);
  EXPECT_EQ(a->exact_weight_pulls(), 2);
  EXPECT_EQ(b->update_pulls(), 2 * 5);
  EXPECT_EQ(b->exact_weight_pulls(), 2);
  for (auto& server : servers_) {  // the servers counted the same
    EXPECT_EQ(server->store()->stats().update_pulls, 10u + 5u);
  }
  // The updates are a small part of the float32 model's bytes.
  const double float_bytes = 4.0 * n * 2 * 10;
  EXPECT_LT(a->update_bytes_received(), 0.5 * float_bytes);
  EXPECT_GT(a->update_bytes_received(), 0);
}

// A pruned model: its servers log updates too. Workers a (1-bit, replayed
// on the pulling thread) and b (top-k, in 3 parts) get the mask with their
// bases and replay the updates under it: after every pull their models are
// the servers' bit for bit, pruned weights 0, and every pull after the
// first is updates only. Worker c keeps its copies elsewhere (as on a
// device): the mask goes there with the weights, and it replays the same
// updates as plans under it.
TEST_F(DeltaPullTest, APrunedModelIsReplayedUnderItsMask) {
  PoolSettings settings;
  settings.optimizer.learning_rate = 0.3f;
  settings.optimizer.weight_decay = 0.01f;
  settings.staleness_lr_scale = StalenessLrScale::kInverse;
  settings.pruned = true;
  Start(settings);
  auto a = Connect(PushEncoding::kOneBit, 1);
  auto b = Connect(PushEncoding::kTopK, 2, /*replay_threads=*/3);
  auto c = Connect(PushEncoding::kOneBit, 3);
  ASSERT_TRUE(a && b && c);
  ASSERT_TRUE(a->uses_delta_pulls());
  ASSERT_TRUE(c->KeepExactCopiesOn(CreateHostReplayCopy).ok());
  const int64_t n = a->layout().total_size();
  std::vector<float> pa(n), pb(n), pc(n);
  std::vector<uint64_t> va, vb, vc;
  ASSERT_TRUE(a->Pull(absl::MakeSpan(pa), &va).ok());
  ASSERT_TRUE(b->Pull(absl::MakeSpan(pb), &vb).ok());
  ASSERT_TRUE(c->Pull(absl::MakeSpan(pc), &vc).ok());
  for (int step = 0; step < 8; ++step) {
    ASSERT_TRUE(a->Push(Gradient(n, 0.1f + 0.01f * step), va, 1).ok());
    ASSERT_TRUE(b->Push(Gradient(n, -0.2f + 0.02f * step), vb, 1).ok());
    ASSERT_TRUE(c->Push(Gradient(n, 0.15f), vc, 1).ok());
    ASSERT_TRUE(a->Pull(absl::MakeSpan(pa), &va).ok());
    ASSERT_TRUE(b->Pull(absl::MakeSpan(pb), &vb).ok());
    ASSERT_TRUE(c->Pull(absl::MakeSpan(pc), &vc).ok());
    const std::vector<float> model = Model();
    ExpectBitEqual(pa, model, absl::StrCat("worker a, step ", step));
    ExpectBitEqual(pb, model, absl::StrCat("worker b, step ", step));
    ExpectBitEqual(pc, model, absl::StrCat("worker c, step ", step));
    int64_t moved = 0;
    for (int64_t i = 0; i < n; ++i) {
      if ((*keep_)[i] == 0) {
        ASSERT_EQ(model[i], 0.0f) << "pruned weight " << i;
      } else {
        moved += model[i] != 0.0f;
      }
    }
    EXPECT_GT(moved, n / 2);
  }
  EXPECT_EQ(va[0], 24u);
  EXPECT_EQ(a->exact_weight_pulls(), 2);  // one base per server
  EXPECT_EQ(a->update_pulls(), 2 * 8);
  EXPECT_EQ(b->exact_weight_pulls(), 2);
  EXPECT_EQ(b->update_pulls(), 2 * 8);
  EXPECT_EQ(c->exact_weight_pulls(), 2);
  EXPECT_EQ(c->update_pulls(), 2 * 8);
  EXPECT_GT(c->replay_plan_bytes(), 0);
  for (auto& server : servers_) {
    EXPECT_EQ(server->store()->stats().update_pulls, 8u + 8u + 8u);
  }
  const double float_bytes = 4.0 * n * 8;
  EXPECT_LT(a->update_bytes_received(), 0.5 * float_bytes);
}

// The same exchange with worker a's copies kept elsewhere, as a GPU worker
// keeps them on its device: after KeepExactCopiesOn the next pull brings
// weights, later ones updates only, replayed as plans on the copies; every
// pull leaves the servers' model, bit for bit.
TEST_F(DeltaPullTest, CopiesKeptElsewhereAreExactlyTheServersModel) {
  PoolSettings settings;
  settings.optimizer.learning_rate = 0.3f;
  settings.optimizer.weight_decay = 0.01f;
  settings.staleness_lr_scale = StalenessLrScale::kInverse;
  Start(settings);
  auto a = Connect(PushEncoding::kOneBit, 1, /*replay_threads=*/3);
  auto b = Connect(PushEncoding::kTopK, 2);
  ASSERT_TRUE(a && b);
  const int64_t n = a->layout().total_size();
  std::vector<float> pa(n), pb(n);
  std::vector<uint64_t> va, vb;
  ASSERT_TRUE(a->Pull(absl::MakeSpan(pa), &va).ok());  // a host copy first
  int copies_made = 0;
  ASSERT_TRUE(a->KeepExactCopiesOn([&](int64_t count) {
                 ++copies_made;
                 return CreateHostReplayCopy(count);
               }).ok());
  EXPECT_EQ(copies_made, 2);
  ASSERT_TRUE(b->Pull(absl::MakeSpan(pb), &vb).ok());
  for (int step = 0; step < 8; ++step) {
    ASSERT_TRUE(a->Push(Gradient(n, 0.1f + 0.01f * step), va, 1).ok());
    ASSERT_TRUE(b->Push(Gradient(n, -0.2f + 0.02f * step), vb, 1).ok());
    ASSERT_TRUE(b->Pull(absl::MakeSpan(pb), &vb).ok());
    std::fill(pa.begin(), pa.end(), -7.0f);  // all of it comes from the copies
    ASSERT_TRUE(a->Pull(absl::MakeSpan(pa), &va).ok());
    ExpectBitEqual(pa, Model(), absl::StrCat("worker a, step ", step));
  }
  // Its host copies were dropped: one more weight pull per server.
  EXPECT_EQ(a->exact_weight_pulls(), 2 * 2);
  EXPECT_EQ(a->update_pulls(), 2 * 7);
  EXPECT_GT(a->replay_plan_bytes(), 0);
  EXPECT_LT(a->replay_plan_bytes(), 4 * n * 7);  // a small part of float32
  EXPECT_EQ(b->replay_plan_bytes(), 0);
  const DeltaPullStats stats = a->delta_pull_stats();
  EXPECT_TRUE(stats.copies_elsewhere);
  EXPECT_EQ(stats.update_pulls, a->update_pulls());
  EXPECT_EQ(stats.weight_pulls, a->exact_weight_pulls());
  EXPECT_EQ(stats.update_bytes, a->update_bytes_received());
  EXPECT_EQ(stats.plan_bytes, a->replay_plan_bytes());
  EXPECT_FALSE(b->delta_pull_stats().copies_elsewhere);
}

// A factory that fails leaves no copy elsewhere (the client goes on with
// host copies, from weights); a client without delta pulls keeps none.
TEST_F(DeltaPullTest, CopiesElsewhereAreAllOrNone) {
  PoolSettings settings;
  settings.optimizer.learning_rate = 0.1f;
  Start(settings);
  auto a = Connect(PushEncoding::kOneBit, 1);
  ASSERT_TRUE(a);
  const int64_t n = a->layout().total_size();
  std::vector<float> pa(n);
  std::vector<uint64_t> va;
  int calls = 0;
  const absl::Status refused = a->KeepExactCopiesOn(
      [&](int64_t count) -> absl::StatusOr<std::unique_ptr<ExactCopy>> {
        if (++calls == 2) return absl::ResourceExhaustedError("no memory");
        return CreateHostReplayCopy(count);
      });
  EXPECT_EQ(refused.code(), absl::StatusCode::kResourceExhausted) << refused;
  EXPECT_EQ(calls, 2);
  ASSERT_TRUE(a->Pull(absl::MakeSpan(pa), &va).ok());
  ASSERT_TRUE(a->Push(Gradient(n, 0.1f), va, 1).ok());
  ASSERT_TRUE(a->Pull(absl::MakeSpan(pa), &va).ok());
  ExpectBitEqual(pa, Model(), "host copies after the refusal");
  EXPECT_EQ(a->update_pulls(), 2);
  EXPECT_EQ(a->replay_plan_bytes(), 0);
  EXPECT_FALSE(a->delta_pull_stats().copies_elsewhere);
  // A copy of the wrong size is refused too.
  EXPECT_EQ(a->KeepExactCopiesOn([](int64_t count) {
                 return CreateHostReplayCopy(count + 1);
               }).code(),
            absl::StatusCode::kInternal);

  PoolClientOptions o;
  o.wire_dtype = WireDtype::kBfloat16;  // no delta pulls
  o.connect_timeout = absl::Seconds(30);
  auto bf16 = GrpcParamClient::Create(addresses_, o);
  ASSERT_TRUE(bf16.ok()) << bf16.status();
  EXPECT_EQ((*bf16)
                ->KeepExactCopiesOn([](int64_t count) {
                  return CreateHostReplayCopy(count);
                })
                .code(),
            absl::StatusCode::kUnimplemented);
}

// Float32 pushes cannot be replayed: a delta pull across one gets weights.
// Once the newest update is compressed again, the pull gets a consistent
// base, then updates only.
TEST_F(DeltaPullTest, FloatPushesFallBackToWeights) {
  PoolSettings settings;
  settings.optimizer.learning_rate = 0.5f;
  Start(settings);
  auto a = Connect(PushEncoding::kOneBit, 1);
  auto f = Connect(PushEncoding::kFloat32, 2);
  ASSERT_TRUE(a && f);
  const int64_t n = a->layout().total_size();
  std::vector<float> pa(n), pf(n);
  std::vector<uint64_t> va, vf;
  ASSERT_TRUE(a->Pull(absl::MakeSpan(pa), &va).ok());
  ASSERT_TRUE(f->Pull(absl::MakeSpan(pf), &vf).ok());
  ASSERT_TRUE(f->Push(Gradient(n, 0.1f), vf, 1).ok());
  // The newest update is float32: plain weights.
  const int64_t bases = a->exact_weight_pulls();
  ASSERT_TRUE(a->Pull(absl::MakeSpan(pa), &va).ok());
  ExpectBitEqual(pa, Model(), "after a float32 push");
  EXPECT_EQ(a->exact_weight_pulls(), bases);
  EXPECT_EQ(a->update_pulls(), 0);
  // A 1-bit push: the next pull gets a new base, the one after updates.
  ASSERT_TRUE(a->Push(Gradient(n, 0.2f), va, 1).ok());
  ASSERT_TRUE(a->Pull(absl::MakeSpan(pa), &va).ok());
  ExpectBitEqual(pa, Model(), "base after a 1-bit push");
  EXPECT_EQ(a->exact_weight_pulls(), bases + 2);
  ASSERT_TRUE(a->Push(Gradient(n, 0.3f), va, 1).ok());
  ASSERT_TRUE(a->Pull(absl::MakeSpan(pa), &va).ok());
  ExpectBitEqual(pa, Model(), "updates after the base");
  EXPECT_EQ(a->update_pulls(), 2);
}

// A log too small for one update: every pull needs a new base, and is
// still exact.
TEST_F(DeltaPullTest, ALogTooSmallStillGivesExactModels) {
  PoolSettings settings;
  settings.optimizer.learning_rate = 0.5f;
  settings.delta_log_bytes = 16;
  Start(settings);
  auto a = Connect(PushEncoding::kOneBit, 1);
  ASSERT_TRUE(a);
  const int64_t n = a->layout().total_size();
  std::vector<float> pa(n);
  std::vector<uint64_t> va;
  ASSERT_TRUE(a->Pull(absl::MakeSpan(pa), &va).ok());
  for (int step = 0; step < 3; ++step) {
    ASSERT_TRUE(a->Push(Gradient(n, 0.1f * (step + 1)), va, 1).ok());
    ASSERT_TRUE(a->Pull(absl::MakeSpan(pa), &va).ok());
    ExpectBitEqual(pa, Model(), absl::StrCat("step ", step));
  }
  EXPECT_EQ(a->update_pulls(), 0);
  EXPECT_EQ(a->exact_weight_pulls(), 2 * 4);
}

// A replay thread count outside [0, 64] is refused when the client connects.
TEST_F(DeltaPullTest, ReplayThreadsOutOfRangeAreRefused) {
  PoolSettings settings;
  settings.optimizer.learning_rate = 0.1f;
  Start(settings);
  for (int threads : {-1, 65}) {
    PoolClientOptions o;
    o.replay_threads = threads;
    o.connect_timeout = absl::Seconds(30);
    auto client = GrpcParamClient::Create(addresses_, o);
    EXPECT_EQ(client.status().code(), absl::StatusCode::kInvalidArgument)
        << threads;
  }
}

// A server whose optimizer keeps momentum does not offer delta pulls: the
// client pulls weights, and a delta request is refused; so is a bfloat16
// one on a server that offers them. A copy "from the future" gets a base.
TEST_F(DeltaPullTest, RequestsTheServerCannotAnswerAreRefused) {
  for (bool momentum : {true, false}) {
    SCOPED_TRACE(momentum ? "momentum" : "plain SGD");
    servers_.clear();
    addresses_.clear();
    PoolSettings settings;
    settings.num_servers = 1;
    settings.optimizer.learning_rate = 0.1f;
    settings.optimizer.momentum = momentum ? 0.9f : 0.0f;
    Start(settings);
    auto stub = asgd::v1::ParameterServer::NewStub(grpc::CreateChannel(
        addresses_[0], grpc::InsecureChannelCredentials()));
    grpc::ClientContext dctx;
    asgd::v1::ModelDescription description;
    ASSERT_TRUE(stub->DescribeModel(&dctx, {}, &description).ok());
    EXPECT_EQ(description.delta_pulls(), !momentum);

    // One delta request on a fresh stream: whether the reply was exact,
    // how many weight chunks it had, and the lineage it ended with.
    uint64_t weight_chunks = 0, lineage = 0;
    auto pull = [&](asgd::v1::WireDtype dtype, bool has_copy,
                    uint64_t version, bool* exact,
                    uint64_t copy_lineage = 0) {
      grpc::ClientContext ctx;
      ctx.set_deadline(std::chrono::system_clock::now() +
                       std::chrono::seconds(30));
      auto stream = stub->PullStream(&ctx);
      asgd::v1::PullRequest request;
      request.set_delta(true);
      request.set_dtype(dtype);
      request.set_has_copy(has_copy);
      request.set_model_version(version);
      request.set_lineage(copy_lineage);
      EXPECT_TRUE(stream->Write(request));
      asgd::v1::PullChunk chunk;
      *exact = false;
      weight_chunks = 0;
      while (stream->Read(&chunk)) {
        *exact = chunk.exact();
        if (chunk.has_chunk() && !chunk.chunk().tensor().empty()) {
          ++weight_chunks;
        }
        if (chunk.end_of_pull()) {
          lineage = chunk.lineage();
          break;
        }
      }
      stream->WritesDone();
      return stream->Finish();
    };
    bool exact = false;
    grpc::Status status = pull(asgd::v1::FLOAT32, false, 0, &exact);
    if (momentum) {
      EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT)
          << status.error_message();
    } else {
      EXPECT_TRUE(status.ok()) << status.error_message();
      EXPECT_TRUE(exact);
      EXPECT_GT(weight_chunks, 0u);  // no copy: a base
      status = pull(asgd::v1::BFLOAT16, false, 0, &exact);
      EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT)
          << status.error_message();
      const uint64_t server_lineage = lineage;
      EXPECT_NE(server_lineage, 0u);
      status = pull(asgd::v1::FLOAT32, true, 1000000, &exact, server_lineage);
      EXPECT_TRUE(status.ok()) << status.error_message();
      EXPECT_TRUE(exact);  // a base, not updates from the future
      EXPECT_GT(weight_chunks, 0u);
      // A copy at the server's version, of its lineage: nothing to send.
      status = pull(asgd::v1::FLOAT32, true, 0, &exact, server_lineage);
      EXPECT_TRUE(status.ok()) << status.error_message();
      EXPECT_TRUE(exact);
      EXPECT_EQ(weight_chunks, 0u);
      // The same version from another lineage (a server process that
      // restarted): a base.
      status = pull(asgd::v1::FLOAT32, true, 0, &exact, server_lineage + 1);
      EXPECT_TRUE(status.ok()) << status.error_message();
      EXPECT_GT(weight_chunks, 0u);
    }
    // The worker's client works either way.
    auto a = Connect(PushEncoding::kOneBit, 1);
    ASSERT_TRUE(a);
    const int64_t n = a->layout().total_size();
    std::vector<float> pa(n);
    std::vector<uint64_t> va;
    ASSERT_TRUE(a->Pull(absl::MakeSpan(pa), &va).ok());
    ASSERT_TRUE(a->Push(Gradient(n, 0.1f), va, 1).ok());
    ASSERT_TRUE(a->Pull(absl::MakeSpan(pa), &va).ok());
    ExpectBitEqual(pa, Model(), "after a push");
    EXPECT_EQ(a->update_pulls(), momentum ? 0 : 1);
  }
}

}  // namespace
}  // namespace asgd
