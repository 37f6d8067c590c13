// Hostile and faulty load against the real asgd_server binary, each attack
// with the bound that holds it: memory (the server's VmRSS), time, status
// codes, and a model that stays as it was.
//
//  * 64 push streams that send a header and stall: at most
//    --max_pushes_per_peer of them are admitted from one address (the rest
//    are refused at once, UNAVAILABLE with the PEER_LIMIT refusal), the
//    admitted ones are ended by the server at the progress timeout
//    (DEADLINE_EXCEEDED), and the server's memory hardly moves: a stream
//    holds no staging buffer until data arrives. Without the cap, 64 such
//    streams and 32 that send nothing at all are all ended at the timeout.
//  * streams that send one chunk and stall: staging memory stays within
//    --push_memory_mb, charged with the bytes each sent; the rest are
//    refused at once (PUSH_MEMORY).
//  * pushes of 3e38 asking for the largest step (max-change off): refused;
//    the model, the checkpoint written at shutdown and the model a restarted
//    server restores are all finite and unchanged.
//  * pushes of -1e35 with the default max-change: no weight moves by more
//    than it.
//  * a FetchBatches call with 2^64-1 frames and 1e300 epochs, or with no run
//    id: refused; the workers' pool goes on, and a client that names the
//    workers' dataset with a run id of its own and exhausts it does not
//    touch theirs.
//  * idle, half-sent HTTP connections to /metrics (up to 64): a scrape still
//    answers within a second.
//  * pushes from thousands of worker ids: the per-worker metric series stay
//    bounded.
//  * DC-ASGD pulls by 40 workers: the model copies stay within
//    --dc_memory_mb.
//
// Flags (after gtest's): --server=PATH (required), --model=small|seed (seed:
// the 87 MB DNN of the benchmarks), --worker_ids=N (default 3000), and
// --legacy_server to measure a server from before these limits existed: no
// new server flag is passed and the bounds are reported as well as checked
// (they fail there). The progress timeout is 2 s, so the test takes about
// half a minute.
//
//   bazel test //tests:hostile_load_test --test_output=streamed
//   bazel-bin/tests/hostile_load_test --model=seed --worker_ids=20000
//       --server=bazel-bin/server/asgd_server   (one command line)
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/chunking.h"
#include "common/model_layout.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "proto/asgd.grpc.pb.h"
#include "server/checkpoint.h"
#include "tests/server_process.h"

namespace asgd {
namespace {

using asgd::v1::PushChunk;
using asgd::v1::PushReply;

// Set by main().
std::string g_server_path;
bool g_seed_model = false;
bool g_legacy = false;
int g_worker_ids = 3000;

constexpr double kProgressTimeoutS = 2;
// How late an answer may come on a loaded 2-core machine.
constexpr double kSlackS = 5;
// How long a stream may stay open before the test gives up on it (a legacy
// server never ends a stalled stream).
constexpr int kGiveUpS = 40;

// A DNN of 440 inputs (one row of 440 features; a legacy server took
// --input_dim instead).
std::vector<std::string> ModelFlags() {
  std::vector<std::string> flags =
      g_legacy ? std::vector<std::string>{"--input_dim=440"}
               : std::vector<std::string>{"--feature_dim=440", "--context=0"};
  if (g_seed_model) {
    flags.insert(flags.end(), {"--hidden=2048,2048,2048,2048,2048",
                               "--num_classes=2000"});
  } else {
    flags.insert(flags.end(), {"--hidden=512,512", "--num_classes=40"});
  }
  return flags;
}

// The most the server's memory may grow while streams that hold no data
// stall: the bookkeeping of the streams, never model-sized buffers.
int64_t StallGrowthBoundKb() { return g_seed_model ? (1 << 20) : 48 << 10; }

double Seconds(absl::Time from) {
  return absl::ToDoubleSeconds(absl::Now() - from);
}

// What happened to one attacking stream.
struct StreamEnd {
  grpc::StatusCode code = grpc::StatusCode::OK;
  std::string refusal;  // the "asgd-refusal" trailer, if any
  std::string message;  // the status message (reported, never decided on)
  double seconds = 0;   // from its first message (or its start) to its end
  absl::Time start;     // when its first message was written
};

// The model as the server describes it and the chunks of its range.
struct Model {
  asgd::v1::ModelDescription desc;
  std::vector<ChunkRef> chunks;
  int64_t range_size = 0;
};

class HostileLoadTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(g_server_path.empty()) << "pass --server=PATH to asgd_server";
  }

  void TearDown() override {
    if (HasFailure()) {
      std::printf("--- asgd_server log ---\n%s", server_.Log().c_str());
    }
  }

  // Starts the server with the model flags, `flags` and, unless measuring a
  // legacy server, `new_flags` (flags that server would not know).
  void StartServer(std::vector<std::string> flags,
                   const std::vector<std::string>& new_flags = {}) {
    std::vector<std::string> all = ModelFlags();
    all.push_back("--num_shards=2");
    all.push_back("--log_every_s=0");
    all.insert(all.end(), flags.begin(), flags.end());
    if (!g_legacy) all.insert(all.end(), new_flags.begin(), new_flags.end());
    server_.Start(g_server_path, all, TestDir());
    const int port = server_.WaitForPort(absl::Seconds(120));
    ASSERT_GT(port, 0) << "asgd_server did not start; its log:\n"
                       << server_.Log();
    Connect(port);
  }

  // Talks to the server on `port`: its model and the chunks of its range.
  void Connect(int port) {
    address_ = absl::StrCat("127.0.0.1:", port);
    stub_ = NewStub(address_);
    grpc::ClientContext ctx;
    SetDeadline(&ctx, std::chrono::seconds(30));
    ASSERT_TRUE(stub_->DescribeModel(&ctx, {}, &model_.desc).ok());
    std::vector<TensorSpec> tensors;
    for (const auto& t : model_.desc.tensors()) {
      TensorSpec spec{t.name(), {}};
      for (uint64_t d : t.shape())
        spec.shape.push_back(static_cast<int64_t>(d));
      tensors.push_back(spec);
    }
    auto layout = ModelLayout::Create(tensors, model_.desc.num_servers(),
                                      model_.desc.num_shards());
    ASSERT_TRUE(layout.ok()) << layout.status();
    layout_ = std::make_unique<ModelLayout>(*std::move(layout));
    const FlatRange range = layout_->ServerRange(model_.desc.server_index());
    model_.chunks =
        PlanChunks(*layout_, range, model_.desc.max_chunk_elements());
    model_.range_size = range.size();
  }

  PushChunk Header(uint64_t version, uint32_t minibatches,
                   uint64_t worker = 1) {
    PushChunk m;
    m.set_model_version(version);
    m.mutable_header()->set_worker_id(worker);
    m.mutable_header()->set_model_version(version);
    m.mutable_header()->set_num_minibatches(minibatches);
    return m;
  }

  PushChunk Chunk(size_t i, uint64_t version, float value) {
    const ChunkRef& c = model_.chunks[i];
    PushChunk m;
    m.set_model_version(version);
    m.mutable_chunk()->set_tensor(layout_->tensors()[c.tensor].name);
    m.mutable_chunk()->set_offset(c.offset);
    std::vector<float> values(c.count, value);
    AppendFloats(values.data(), c.count, m.mutable_chunk()->mutable_data());
    return m;
  }

  // A whole push of `value` everywhere, on a PushStream of its own; its
  // reply and the stream's status.
  grpc::Status Push(float value, uint64_t version, uint32_t minibatches,
                    PushReply* reply, uint64_t worker = 1) {
    grpc::ClientContext ctx;
    SetDeadline(&ctx, std::chrono::seconds(60));
    auto writer = stub_->PushStream(&ctx);
    bool ok = writer->Write(Header(version, minibatches, worker));
    for (size_t i = 0; ok && i < model_.chunks.size(); ++i) {
      ok = writer->Write(Chunk(i, version, value));
    }
    if (ok) {
      PushChunk commit;
      commit.set_model_version(version);
      commit.mutable_commit()->set_num_chunks(model_.chunks.size());
      writer->Write(commit);
    }
    writer->WritesDone();
    writer->Read(reply);
    return writer->Finish();
  }

  // One pull of `request` on a PullStream of its own: every message of the
  // reply to `on_message`, then the stream's status.
  grpc::Status PullOnce(
      const asgd::v1::PullRequest& request,
      const std::function<void(const asgd::v1::PullChunk&)>& on_message) {
    grpc::ClientContext ctx;
    SetDeadline(&ctx, std::chrono::seconds(60));
    auto stream = stub_->PullStream(&ctx);
    stream->Write(request);
    stream->WritesDone();
    asgd::v1::PullChunk chunk;
    while (stream->Read(&chunk)) on_message(chunk);
    return stream->Finish();
  }

  uint64_t Version() {
    grpc::ClientContext ctx;
    SetDeadline(&ctx, std::chrono::seconds(30));
    asgd::v1::ModelDescription d;
    EXPECT_TRUE(stub_->DescribeModel(&ctx, {}, &d).ok());
    return d.model_version();
  }

  // This server's weights, as a pull returns them.
  std::vector<float> PullWeights() {
    std::vector<float> w;
    const grpc::Status s = PullOnce({}, [&](const asgd::v1::PullChunk& chunk) {
      const std::string& data = chunk.chunk().data();
      const size_t old = w.size();
      w.resize(old + data.size() / 4);
      std::memcpy(w.data() + old, data.data(), data.size());
    });
    EXPECT_TRUE(s.ok()) << s.error_message();
    return w;
  }

  // Runs `streams` attacking streams at once, each on its own connection:
  // `attack(i, writer)` writes what stream i sends, then the stream waits
  // for the server to end it (or kGiveUpS). Samples the server's memory
  // meanwhile; returns each stream's end and sets the largest growth.
  using PushWriter = grpc::ClientReaderWriter<PushChunk, PushReply>;
  std::vector<StreamEnd> Attack(
      int streams,
      const std::function<void(int, PushWriter*)>& attack,
      int64_t* growth_kb) {
    const int64_t before = RssKb(server_.pid());
    std::atomic<int64_t> peak{before};
    std::atomic<int> open{streams};
    std::vector<StreamEnd> ends(streams);
    std::vector<std::thread> threads;
    for (int i = 0; i < streams; ++i) {
      threads.emplace_back([&, i] {
        auto stub = NewStub(address_);
        grpc::ClientContext ctx;
        SetDeadline(&ctx, std::chrono::seconds(kGiveUpS));
        WaitForConnection(&ctx);
        auto writer = stub->PushStream(&ctx);
        const absl::Time start = absl::Now();
        ends[i].start = start;
        attack(i, writer.get());
        const grpc::Status s = writer->Finish();
        ends[i].seconds = Seconds(start);
        ends[i].code = s.error_code();
        ends[i].message = s.error_message();
        const auto& trailers = ctx.GetServerTrailingMetadata();
        auto it = trailers.find("asgd-refusal");
        if (it != trailers.end()) {
          ends[i].refusal.assign(it->second.data(), it->second.size());
        }
        open.fetch_sub(1);
      });
    }
    while (open.load() > 0) {
      absl::SleepFor(absl::Milliseconds(20));  // a sampling interval
      peak = std::max(peak.load(), RssKb(server_.pid()));
    }
    for (std::thread& t : threads) t.join();
    *growth_kb = peak.load() - before;
    return ends;
  }

  // Counts and reports the ends; returns the slowest per (code, refusal).
  void Report(const char* what, const std::vector<StreamEnd>& ends,
              int64_t growth_kb) {
    struct Kind {
      int count = 0;
      double slowest = 0;
      std::string message;  // the first one's
    };
    std::map<std::string, Kind> by_kind;
    for (const StreamEnd& e : ends) {
      Kind& kind = by_kind[absl::StrCat(e.code, e.refusal.empty() ? "" : "/",
                                        e.refusal)];
      if (kind.count++ == 0) kind.message = e.message;
      kind.slowest = std::max(kind.slowest, e.seconds);
    }
    std::printf("%s: server RSS growth %.1f MB;", what, growth_kb / 1024.0);
    for (const auto& [name, kind] : by_kind) {
      std::printf(" %d ended with code %s after at most %.2f s (\"%s\");",
                  kind.count, name.c_str(), kind.slowest,
                  kind.message.substr(0, 120).c_str());
    }
    const int gave_up = static_cast<int>(std::count_if(
        ends.begin(), ends.end(),
        [](const StreamEnd& e) { return e.seconds >= kGiveUpS - 1; }));
    if (gave_up > 0) {
      std::printf(" %d still open when the client gave up after %d s;", gave_up,
                  kGiveUpS);
    }
    std::printf("\n");
    std::fflush(stdout);
  }

  // After an attack: the server answers and applies a valid push.
  void ExpectHealthy() {
    PushReply reply;
    const grpc::Status s = Push(1e-6f, Version(), 1, &reply);
    EXPECT_TRUE(s.ok()) << s.error_code() << " " << s.error_message();
    EXPECT_EQ(reply.result(), PushReply::APPLIED);
  }

  ServerProcess server_;
  std::string address_;
  std::unique_ptr<asgd::v1::ParameterServer::Stub> stub_;
  std::unique_ptr<ModelLayout> layout_;
  Model model_;
};

int Count(const std::vector<StreamEnd>& ends, grpc::StatusCode code,
          const std::string& refusal = "") {
  return static_cast<int>(
      std::count_if(ends.begin(), ends.end(), [&](const StreamEnd& e) {
        return e.code == code && e.refusal == refusal;
      }));
}

// Expects `admitted` streams ended by the server's progress timeout and the
// rest refused at once with `refusal`. Exact when every stream started within
// the progress timeout of the first (the cap was full for all of them); on a
// machine so loaded that some started later, an admitted stream may have
// timed out and freed its place before they came, so more can be admitted,
// never fewer, and every stream still ends one of the two ways.
void ExpectCapped(const std::vector<StreamEnd>& ends, int admitted,
                  const std::string& refusal) {
  absl::Time first = absl::InfiniteFuture(), last = absl::InfinitePast();
  for (const StreamEnd& e : ends) {
    first = std::min(first, e.start);
    last = std::max(last, e.start);
  }
  const int timed_out = Count(ends, grpc::StatusCode::DEADLINE_EXCEEDED);
  const int refused = Count(ends, grpc::StatusCode::UNAVAILABLE, refusal);
  EXPECT_EQ(timed_out + refused, static_cast<int>(ends.size()));
  if (absl::ToDoubleSeconds(last - first) < kProgressTimeoutS - 0.5) {
    EXPECT_EQ(timed_out, admitted);
  } else {
    std::printf("the streams started over %.2f s: the cap may free up\n",
                absl::ToDoubleSeconds(last - first));
    EXPECT_GE(timed_out, admitted);
  }
}

double Slowest(const std::vector<StreamEnd>& ends, grpc::StatusCode code) {
  double slowest = 0;
  for (const StreamEnd& e : ends) {
    if (e.code == code) slowest = std::max(slowest, e.seconds);
  }
  return slowest;
}

TEST_F(HostileLoadTest, StalledHeaderOnlyPushesAreCappedAndEnded) {
  StartServer({},
              {absl::StrCat("--push_progress_timeout_s=", kProgressTimeoutS),
               "--max_pushes_per_peer=16"});
  int64_t growth_kb = 0;
  const std::vector<StreamEnd> ends = Attack(
      64,
      [&](int, PushWriter* w) { w->Write(Header(0, 1)); },
      &growth_kb);
  Report("64 header-only stalled pushes", ends, growth_kb);
  EXPECT_LT(growth_kb, StallGrowthBoundKb());
  // 16 admitted and ended at the timeout, 48 refused at once.
  ExpectCapped(ends, 16, "PEER_LIMIT");
  EXPECT_LE(Slowest(ends, grpc::StatusCode::DEADLINE_EXCEEDED),
            kProgressTimeoutS + kSlackS);
  EXPECT_GE(Slowest(ends, grpc::StatusCode::DEADLINE_EXCEEDED),
            kProgressTimeoutS - 0.1);
  EXPECT_LE(Slowest(ends, grpc::StatusCode::UNAVAILABLE), kSlackS);
  ExpectHealthy();
}

TEST_F(HostileLoadTest, WithoutThePeerCapStalledStreamsHoldNoModelMemory) {
  // A push stream that sends nothing is idle, not stalled: the idle timeout
  // ends it (OK), here as soon as the progress timeout would.
  StartServer({},
              {absl::StrCat("--push_progress_timeout_s=", kProgressTimeoutS),
               absl::StrCat("--stream_idle_timeout_s=", kProgressTimeoutS),
               "--max_pushes_per_peer=0"});
  int64_t growth_kb = 0;
  // 64 send a header, 32 send nothing at all.
  const std::vector<StreamEnd> ends = Attack(
      96,
      [&](int i, PushWriter* w) {
        if (i < 64) w->Write(Header(0, 1));
      },
      &growth_kb);
  Report("64 header-only and 32 empty stalled pushes, no peer cap", ends,
         growth_kb);
  EXPECT_LT(growth_kb, StallGrowthBoundKb());
  EXPECT_EQ(Count(ends, grpc::StatusCode::DEADLINE_EXCEEDED), 64);
  EXPECT_EQ(Count(ends, grpc::StatusCode::OK), 32);
  EXPECT_LE(Slowest(ends, grpc::StatusCode::DEADLINE_EXCEEDED),
            kProgressTimeoutS + kSlackS);
  EXPECT_LE(Slowest(ends, grpc::StatusCode::OK), kProgressTimeoutS + kSlackS);
  ExpectHealthy();
}

TEST_F(HostileLoadTest, StreamsThatStallAfterDataStayWithinThePushMemory) {
  // The budget is charged as data arrives: room for 9 first chunks of the
  // small model (0.9 MB each; 4 whole pushes), all 16 of the seed's (1 MB).
  const int64_t budget_mb = g_seed_model ? 700 : 8;
  StartServer({},
              {absl::StrCat("--push_progress_timeout_s=", kProgressTimeoutS),
               absl::StrCat("--push_memory_mb=", budget_mb),
               "--max_pushes_per_peer=0"});
  int64_t growth_kb = 0;
  const std::vector<StreamEnd> ends = Attack(
      16,
      [&](int, PushWriter* w) {
        w->Write(Header(0, 1));
        w->Write(Chunk(0, 0, 0.5f));
      },
      &growth_kb);
  Report("16 pushes stalled after one chunk", ends, growth_kb);
  // The budget is charged as bytes arrive: each stalled push holds its one
  // chunk (a legacy server charged a whole model-sized buffer).
  const int64_t charged =
      g_legacy ? model_.range_size * int64_t{4}
               : model_.chunks[0].count * int64_t{4};
  const int fit = static_cast<int>(
      std::min<int64_t>(16, (budget_mb << 20) / charged));
  EXPECT_LT(growth_kb, (budget_mb + 32) << 10);
  ExpectCapped(ends, fit, "PUSH_MEMORY");
  EXPECT_LE(Slowest(ends, grpc::StatusCode::UNAVAILABLE), kSlackS);
  ExpectHealthy();
}

// Non-finite floats in a checkpoint file (its layout: checkpoint.h).
int64_t NonFiniteInCheckpoint(const std::string& path, int64_t* floats) {
  const std::string bytes = ReadFile(path);
  *floats = 0;
  if (bytes.size() < 20) return -1;
  uint32_t header_len;
  std::memcpy(&header_len, bytes.data() + 8, 4);
  const size_t body = 12 + header_len;
  if (bytes.size() < body + 8) return -1;
  *floats = static_cast<int64_t>((bytes.size() - body - 8) / 4);
  int64_t bad = 0;
  for (int64_t i = 0; i < *floats; ++i) {
    float f;
    std::memcpy(&f, bytes.data() + body + 4 * i, 4);
    bad += !std::isfinite(f);
  }
  return bad;
}

int64_t NonFinite(const std::vector<float>& w) {
  return std::count_if(w.begin(), w.end(),
                       [](float x) { return !std::isfinite(x); });
}

TEST_F(HostileLoadTest, HugeGradientsLeaveTheModelAndTheCheckpointFinite) {
  const std::string dir = absl::StrCat(TestDir(), "/hostile-ckpt");
  std::system(absl::StrCat("rm -rf ", dir).c_str());
  const std::vector<std::string> flags = {"--checkpoint_dir=" + dir,
                                          "--checkpoint_every_s=0"};
  // Without max-change (the next test), which would scale these steps down
  // to a finite one: this one holds the finiteness bound alone.
  const std::vector<std::string> new_flags = {"--max_change=0"};
  StartServer(flags, new_flags);
  const std::vector<float> before = PullWeights();
  ASSERT_EQ(NonFinite(before), 0);
  // The attack: finite values of 3e38, the step scaled by 2^20 minibatches,
  // then by the most a push may ask for.
  int accepted = 0;
  for (uint32_t minibatches : {1u << 20, 1u << 20, 1u << 20, 64u, 64u, 64u}) {
    PushReply reply;
    const grpc::Status s = Push(3e38f, Version(), minibatches, &reply);
    std::printf("push of 3e38 x %u minibatches: %s %s\n", minibatches,
                s.ok() ? "OK" : "refused", s.error_message().c_str());
    if (s.ok() && reply.result() == PushReply::APPLIED) ++accepted;
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  }
  const std::vector<float> after = PullWeights();
  const int64_t bad_model = NonFinite(after);
  EXPECT_EQ(bad_model, 0);
  EXPECT_EQ(after, before);
  // The checkpoint written at shutdown.
  ASSERT_EQ(server_.Stop(absl::Seconds(60)), 0) << "no clean exit";
  int64_t floats = 0;
  const std::string file = CheckpointPath(dir, 0, 1);
  const int64_t bad_file = NonFiniteInCheckpoint(file, &floats);
  std::printf(
      "huge gradients: %d of 6 pushes applied; model %lld non-finite of %zu; "
      "checkpoint on disk %lld non-finite of %lld floats\n",
      accepted, static_cast<long long>(bad_model), after.size(),
      static_cast<long long>(bad_file), static_cast<long long>(floats));
  EXPECT_EQ(bad_file, 0);
  EXPECT_EQ(floats, static_cast<int64_t>(before.size()));
  // A server restarted on that directory serves the same finite model.
  StartServer(flags, new_flags);
  const std::vector<float> restored = PullWeights();
  EXPECT_EQ(NonFinite(restored), 0);
  EXPECT_EQ(restored, before);
}

// Finite is not the same as sane: pushes of -1e35 (64 minibatches) are
// scaled down by max-change (default 1.0), so no weight moves by more than
// that per push, and the model stays what training could have made it.
TEST_F(HostileLoadTest, GarbageGradientsMoveNoWeightByMoreThanMaxChange) {
  StartServer({});
  const double kMaxChange = 1.0;  // asgd_server's default
  std::vector<float> before = PullWeights();
  float largest_before = 0;
  for (float w : before) largest_before = std::max(largest_before, std::fabs(w));
  for (int k = 0; k < 3; ++k) {
    PushReply reply;
    const grpc::Status s = Push(-1e35f, Version(), 64, &reply);
    const std::vector<float> after = PullWeights();
    double largest_change = 0;
    for (size_t i = 0; i < after.size(); ++i) {
      largest_change =
          std::max(largest_change, std::fabs(double(after[i]) - before[i]));
    }
    std::printf("push %d of -1e35 x 64 minibatches: %s, largest change of a "
                "weight %.6g (bound %.3g), non-finite %lld\n",
                k + 1, s.ok() ? "applied" : s.error_message().c_str(),
                largest_change, kMaxChange,
                static_cast<long long>(NonFinite(after)));
    EXPECT_TRUE(s.ok()) << s.error_message();
    EXPECT_LE(largest_change, kMaxChange * (1 + 1e-5));
    EXPECT_EQ(NonFinite(after), 0);
    before = after;
  }
  float largest_after = 0;
  for (float w : before) largest_after = std::max(largest_after, std::fabs(w));
  std::printf("largest |w|: %.4g before, %.4g after 3 garbage pushes\n",
              largest_before, largest_after);
  EXPECT_LE(largest_after, largest_before + 3 * kMaxChange * (1 + 1e-5));
}

TEST_F(HostileLoadTest, PoisonedMinibatchPoolRequestsChangeNothing) {
  StartServer({});
  const std::string workers_run = "hostile-load-test-run-0123456789";
  auto fetch = [&](uint64_t worker, uint64_t frames, uint32_t batch,
                   double epochs, uint32_t count,
                   asgd::v1::FetchBatchesReply* reply,
                   const std::string& run_id) {
    grpc::ClientContext ctx;
    SetDeadline(&ctx, std::chrono::seconds(30));
    asgd::v1::FetchBatchesRequest r;
    r.set_worker_id(worker);
    r.set_run_id(run_id);
    r.set_num_frames(frames);
    r.set_batch_size(batch);
    r.set_epochs(epochs);
    r.set_count(count);
    return stub_->FetchBatches(&ctx, r, reply);
  };
  asgd::v1::FetchBatchesReply reply;
  grpc::Status s =
      fetch(66, ~uint64_t{0}, 256, 1e300, 1, &reply, "some-client-run-id-0000");
  std::printf("poisoned FetchBatches: code %d %s\n", s.error_code(),
              s.error_message().c_str());
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  s = fetch(66, 100000, 256, 1, 1024, &reply, "");
  std::printf("FetchBatches without a run id: code %d %s\n", s.error_code(),
              s.error_message().c_str());
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  // The workers' dataset, then the same frames, batch size and epochs under
  // a run id the client made up, exhausted.
  s = fetch(0, 100000, 256, 1, 4, &reply, workers_run);
  std::printf("the workers' first request: code %d %s\n", s.error_code(),
              s.error_message().c_str());
  ASSERT_TRUE(s.ok()) << s.error_code() << " " << s.error_message();
  EXPECT_EQ(reply.batch_ids_size(), 4);
  EXPECT_EQ(reply.batch_ids(0), 0u);
  s = fetch(0, 100000, 256, 1, 1024, &reply, "guessed-run-id-000000000000000");
  std::printf("the workers' dataset under a made-up run id: code %d, %d "
              "batches, exhausted %d\n",
              s.error_code(), reply.batch_ids_size(), reply.exhausted());
  EXPECT_TRUE(s.ok()) << s.error_message();
  EXPECT_TRUE(reply.exhausted());
  s = fetch(1, 100000, 256, 1, 4, &reply, workers_run);
  std::printf("the workers' pool afterwards: code %d %s\n", s.error_code(),
              s.error_message().c_str());
  ASSERT_TRUE(s.ok()) << s.error_code() << " " << s.error_message();
  ASSERT_EQ(reply.batch_ids_size(), 4);
  EXPECT_EQ(reply.batch_ids(0), 4u);
  EXPECT_FALSE(reply.exhausted());
}

TEST_F(HostileLoadTest, IdleHalfSentHttpConnectionsDoNotBlockMetrics) {
  const std::string port_file =
      absl::StrCat(TestDir(), "/hostile-metrics.port");
  unlink(port_file.c_str());
  StartServer({"--metrics_port=0", "--metrics_port_file=" + port_file});
  const int port = ReadPortFile(port_file);
  ASSERT_GT(port, 0);
  ASSERT_FALSE(HttpGetMetrics(port, 10).empty());
  for (int idle : {2, 6, 64}) {
    std::vector<int> fds;
    for (int i = 0; i < idle; ++i) {
      const int fd = TcpConnect(port, 60);
      ASSERT_GE(fd, 0);
      const std::string half = "GET /metrics HTTP/1.1\r\nHost: x\r\n";
      ASSERT_EQ(send(fd, half.data(), half.size(), 0),
                static_cast<ssize_t>(half.size()));
      fds.push_back(fd);
    }
    const absl::Time start = absl::Now();
    const std::string page = HttpGetMetrics(port, kGiveUpS);
    const double seconds = Seconds(start);
    std::printf(
        "/metrics with %d idle half-sent connections: %s after %.2f s\n", idle,
        page.empty() ? "no answer" : "answered", seconds);
    EXPECT_FALSE(page.empty());
    EXPECT_LT(seconds, 1.5);
    for (int fd : fds) close(fd);
  }
}

TEST_F(HostileLoadTest, ManyWorkerIdsKeepTheMetricSeriesBounded) {
  const std::string port_file = absl::StrCat(TestDir(), "/hostile-ids.port");
  unlink(port_file.c_str());
  // A tiny model: the test is about the number of pushers, not the bytes.
  server_.Start(g_server_path,
                {"--feature_dim=4", "--context=0", "--hidden=4", "--num_classes=2",
                 "--num_shards=1", "--log_every_s=0", "--metrics_port=0",
                 "--metrics_port_file=" + port_file},
                TestDir());
  const int grpc_port = server_.WaitForPort(absl::Seconds(60));
  ASSERT_GT(grpc_port, 0);
  Connect(grpc_port);
  const int metrics_port = ReadPortFile(port_file);
  ASSERT_GT(metrics_port, 0);
  const size_t page_before = HttpGetMetrics(metrics_port, 10).size();
  uint64_t version = 0;
  for (int id = 0; id < g_worker_ids; ++id) {
    PushReply reply;
    const grpc::Status s = Push(1e-6f, version, 1, &reply, 100000 + id);
    ASSERT_TRUE(s.ok()) << s.error_message();
    version = reply.model_version();
  }
  const std::string page = HttpGetMetrics(metrics_port, 10);
  int series = 0;
  for (absl::string_view line : absl::StrSplit(page, '\n')) {
    series += absl::StartsWith(
        line, "asgd_server_worker_last_push_timestamp_seconds{");
  }
  std::printf(
      "%d worker ids: /metrics from %zu to %zu bytes, %d per-worker series\n",
      g_worker_ids, page_before, page.size(), series);
  EXPECT_LE(series, 1024);
  EXPECT_LT(page.size(), page_before + 1024 * 200);
}

TEST_F(HostileLoadTest, DelayCompensationCopiesStayWithinTheirMemory) {
  const int64_t budget_mb = g_seed_model ? 1024 : 8;
  StartServer({"--dc_lambda=0.1"},
              {absl::StrCat("--dc_memory_mb=", budget_mb)});
  const int64_t before = RssKb(server_.pid());
  int64_t peak = before;
  for (uint64_t worker = 0; worker < 40; ++worker) {
    asgd::v1::PullRequest request;
    request.set_worker_id(worker);
    ASSERT_TRUE(PullOnce(request, [](const asgd::v1::PullChunk&) {}).ok());
    peak = std::max(peak, RssKb(server_.pid()));
  }
  const int64_t growth_kb = std::max(peak, RssKb(server_.pid())) - before;
  std::printf(
      "40 DC-ASGD pulls: server RSS growth %.1f MB (copies of %.1f MB)\n",
      growth_kb / 1024.0, model_.range_size * 4.0 / (1 << 20));
  EXPECT_LT(growth_kb, (budget_mb + 32) << 10);
}

}  // namespace
}  // namespace asgd

// gtest flags first; then --server=PATH (from BUILD), --model, --worker_ids,
// --legacy_server.
int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg.rfind("--server=", 0) == 0) {
      asgd::g_server_path = arg.substr(9);
    } else if (arg == "--model=seed") {
      asgd::g_seed_model = true;
    } else if (arg == "--model=small") {
      asgd::g_seed_model = false;
    } else if (arg.rfind("--worker_ids=", 0) == 0) {
      asgd::g_worker_ids = std::atoi(arg.substr(13).c_str());
    } else if (arg == "--legacy_server") {
      asgd::g_legacy = true;
    } else {
      std::fprintf(stderr, "unknown argument %s\n", arg.c_str());
      return 2;
    }
  }
  return RUN_ALL_TESTS();
}
