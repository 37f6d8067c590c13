// Soak: 64 concurrent push/pull streams against one real asgd_server process,
// with stalled push streams mixed in.
//
// Starts //server:asgd_server as a child (port 0, --port_file, a ~0.5 MB
// model: --hidden=256, a 1 s push progress timeout, /metrics on port 0),
// then 32 pusher and 32 puller threads, each with its own channel and one
// stream in flight at a time, and 8 staller threads that keep opening push
// streams that send only a header, or nothing, and then wait, for
// --soak_seconds (default 60; env SOAK_SECONDS): a warm-up (the first
// quarter), after which the clients stop, and the rest with new clients.
// A leak is judged on what the server holds with no call in flight, from
// its own asgd_process_* gauges: after the measured load its heap in use
// (what malloc handed out and did not get back) must come back to within
// kMaxHeapGrowthBytes of what it was after the warm-up, and its threads
// and open files to within a few of it (waiting, bounded, for gRPC to free
// the last calls). Resident memory is reported, not judged: under load it
// moves with the messages in flight and with the machine's speed, and
// malloc keeps what a burst of them freed (common/freed_memory.h).
// Every stalled stream must be ended by the server (DEADLINE_EXCEEDED)
// within the timeout plus a few seconds of slack. Afterwards the server must
// still be healthy (gRPC health SERVING, DescribeModel answers), its version
// must equal the pushes it answered APPLIED, and it must exit 0 on SIGTERM.
// Prints pushes/s, pulls/s, stalled streams ended, RSS under load, and the
// heap, threads and open files after the warm-up and at the end.
//
//   bazel test //tests:soak_push_pull_test --test_output=streamed
//   bazel test //tests:soak_push_pull_test --test_arg=--soak_seconds=1800
//       --test_timeout=2400   (one command line)
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/chunking.h"
#include "common/model_layout.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "proto/asgd.grpc.pb.h"
#include "server/health_probe.h"
#include "tests/server_process.h"

namespace asgd {
namespace {

using asgd::v1::PushChunk;
using asgd::v1::PushReply;

// Set by main() from the command line.
std::string g_server_path;
double g_soak_seconds = 60;

constexpr int kPushers = 32;
constexpr int kPullers = 32;
constexpr int kStallers = 8;
constexpr double kProgressTimeoutS = 1;
// How late a stalled stream may be ended on a loaded 2-core machine.
constexpr double kStallSlackS = 10;
constexpr double kWarmupFraction = 0.25;
// The bound on the growth of the server's heap in use (malloc: handed out and
// not freed, asgd_process_heap_in_use_bytes on its /metrics) between two
// moments with no call in flight: after the warm-up and after the measured
// load (about 100,000 pushes and pulls in 45 s here, ~20 bytes each). A leak
// grows with the work; what the server holds for the model, the workers it
// has seen and its pools was made in the warm-up.
constexpr int64_t kMaxHeapGrowthBytes = int64_t{2} << 20;
// How many more threads and open files than after the warm-up the server may
// hold after the load: gRPC's pools may keep a thread or two more after a
// busier spell (each with its wakeup fd). A leak of either grows with the
// ~100,000 calls and ~400 stalled streams.
constexpr int64_t kMaxExtraThreads = 4;
constexpr int64_t kMaxExtraFds = 4;
// How long the server may take to free the last calls' state once they end.
constexpr double kDrainS = 30;
// RSS (reported, not judged: it moves with the messages in flight, and
// malloc keeps what a burst freed) is also summed up as the median of a
// window this long (a fraction of the run) at the end of the load.
constexpr double kWindowFraction = 0.25;

int64_t Median(std::vector<int64_t> v) {
  std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
  return v[v.size() / 2];
}

// What the clients did; updated by every client thread.
struct Counters {
  std::atomic<int64_t> pushes_applied{0};
  std::atomic<int64_t> pushes_other{0};  // answered, but not APPLIED
  std::atomic<int64_t> pulls{0};
  std::atomic<int64_t> stalled_ended{0};
  std::atomic<int64_t> stalled_slowest_ms{0};
  std::atomic<int64_t> bytes_pushed{0};
  std::atomic<int64_t> bytes_pulled{0};
  std::atomic<int64_t> errors{0};
  absl::Mutex mu;
  std::string first_error ABSL_GUARDED_BY(mu);

  void Error(const std::string& what) {
    errors.fetch_add(1);
    absl::MutexLock lock(&mu);
    if (first_error.empty()) first_error = what;
  }
};

// The model as the server describes it, and the chunks of its range.
struct Plan {
  std::vector<std::string> names;
  std::vector<ChunkRef> chunks;
  int64_t range_size = 0;
};

// What the server holds, from its /metrics and /proc.
struct HeldState {
  int64_t heap_in_use = -1;
  int64_t threads = -1;
  int64_t open_fds = -1;
  int64_t rss_kb = -1;

  // Heap in use, threads and open files within the bounds above of `base`.
  bool WithinBoundsOf(const HeldState& base) const {
    return heap_in_use <= base.heap_in_use + kMaxHeapGrowthBytes &&
           threads <= base.threads + kMaxExtraThreads &&
           open_fds <= base.open_fds + kMaxExtraFds;
  }
  std::string ToString() const {
    return absl::StrFormat(
        "heap in use %.1f MB, %d threads, %d open files, RSS %.1f MB",
        heap_in_use / 1048576.0, threads, open_fds, rss_kb / 1024.0);
  }
};

class SoakTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(g_server_path.empty()) << "pass --server=PATH to asgd_server";
    const char* tmp = std::getenv("TEST_TMPDIR");
    const std::string dir = tmp != nullptr ? tmp : "/tmp";
    // Every client runs on 127.0.0.1: the per-address push cap must admit
    // all of them.
    const std::string metrics_port_file = absl::StrCat(dir, "/metrics.port");
    unlink(metrics_port_file.c_str());
    server_.Start(
        g_server_path,
        {"--hidden=256", "--num_shards=2", "--log_every_s=10",
         "--metrics_port=0", "--metrics_port_file=" + metrics_port_file,
         absl::StrCat("--push_progress_timeout_s=", kProgressTimeoutS),
         absl::StrCat("--stream_idle_timeout_s=", kProgressTimeoutS),
         "--max_pushes_per_peer=64"},
        dir);
    const int port = server_.WaitForPort(absl::Seconds(60));
    ASSERT_GT(port, 0) << "asgd_server did not start; its log:\n"
                       << server_.Log();
    address_ = absl::StrCat("127.0.0.1:", port);
    // The server writes its metrics port before its gRPC port.
    metrics_port_ = ReadPortFile(metrics_port_file);
    ASSERT_GT(metrics_port_, 0) << "no metrics port in " << metrics_port_file;
  }

  void TearDown() override {
    if (HasFailure())
      std::printf("--- asgd_server log ---\n%s", server_.Log().c_str());
  }

  absl::StatusOr<asgd::v1::ModelDescription> Describe() {
    auto stub = NewStub(address_);
    grpc::ClientContext ctx;
    SetDeadline(&ctx, std::chrono::seconds(10));
    asgd::v1::ModelDescription d;
    grpc::Status s = stub->DescribeModel(&ctx, {}, &d);
    if (!s.ok()) return absl::UnavailableError(s.error_message());
    return d;
  }

  // What the server holds now, from its /metrics (scraped with no call of
  // the test in flight) and its RSS.
  absl::StatusOr<HeldState> ReadHeld() {
    const std::string page = HttpGetMetrics(metrics_port_, 10);
    HeldState h;
    h.heap_in_use =
        static_cast<int64_t>(PageValue(page, "asgd_process_heap_in_use_bytes"));
    h.threads = static_cast<int64_t>(PageValue(page, "asgd_process_threads"));
    h.open_fds = static_cast<int64_t>(PageValue(page, "asgd_process_open_fds"));
    h.rss_kb = RssKb(server_.pid());
    if (h.heap_in_use <= 0 || h.threads <= 0 || h.open_fds <= 0) {
      return absl::UnavailableError(absl::StrCat(
          "no asgd_process_* gauges on the server's /metrics:\n", page));
    }
    return h;
  }

  ServerProcess server_;
  std::string address_;
  int metrics_port_ = 0;
};

// One pusher: pushes a small constant gradient over and over, each push
// computed from the version the previous one was assigned (never from the
// future, at most a few versions stale).
void PushLoop(const std::string& address, const Plan& plan, uint64_t worker_id,
              const std::atomic<bool>& stop, Counters& c) {
  auto stub = NewStub(address);
  std::vector<PushChunk> msgs;
  PushChunk header;
  header.mutable_header()->set_worker_id(worker_id);
  header.mutable_header()->set_num_minibatches(1);
  msgs.push_back(header);
  int64_t bytes = 0;
  for (const ChunkRef& ref : plan.chunks) {
    PushChunk m;
    m.mutable_chunk()->set_tensor(plan.names[ref.tensor]);
    m.mutable_chunk()->set_offset(ref.offset);
    std::vector<float> g(ref.count, 1e-6f);
    AppendFloats(g.data(), ref.count, m.mutable_chunk()->mutable_data());
    bytes += m.chunk().data().size();
    msgs.push_back(std::move(m));
  }
  PushChunk commit;
  commit.mutable_commit()->set_num_chunks(plan.chunks.size());
  msgs.push_back(commit);

  uint64_t version = 0;
  while (!stop.load(std::memory_order_relaxed)) {
    msgs[0].mutable_header()->set_model_version(version);
    for (PushChunk& m : msgs) m.set_model_version(version);
    grpc::ClientContext ctx;
    SetDeadline(&ctx, std::chrono::seconds(30));
    WaitForConnection(&ctx);
    PushReply reply;
    auto writer = stub->PushStream(&ctx);  // one push per stream
    for (const PushChunk& m : msgs) {
      if (!writer->Write(m)) break;  // the server ended the stream early
    }
    writer->WritesDone();
    writer->Read(&reply);
    const grpc::Status s = writer->Finish();
    if (!s.ok()) {
      c.Error(absl::StrCat("push: ", s.error_code(), " ", s.error_message()));
      continue;
    }
    if (reply.result() == PushReply::APPLIED) {
      c.pushes_applied.fetch_add(1, std::memory_order_relaxed);
    } else {
      c.pushes_other.fetch_add(1, std::memory_order_relaxed);
    }
    c.bytes_pushed.fetch_add(bytes, std::memory_order_relaxed);
    version = reply.model_version();
  }
}

// One staller: opens a push stream, sends a header (or, every other time,
// nothing) and waits until the server ends the stream, over and over. The
// server must end each one within the progress timeout plus slack: a
// stalled push with DEADLINE_EXCEEDED, a stream that never started a push
// with OK (idle; the server's idle timeout equals the progress timeout).
void StallLoop(const std::string& address, uint64_t worker_id,
               const std::atomic<bool>& stop, Counters& c) {
  auto stub = NewStub(address);
  for (int i = 0; !stop.load(std::memory_order_relaxed); ++i) {
    grpc::ClientContext ctx;
    SetDeadline(&ctx, std::chrono::seconds(60));
    WaitForConnection(&ctx);
    auto writer = stub->PushStream(&ctx);
    const absl::Time start = absl::Now();  // the stream is open
    const bool sends_header = i % 2 == 0;
    if (sends_header) {
      PushChunk header;
      header.mutable_header()->set_worker_id(worker_id);
      header.mutable_header()->set_num_minibatches(1);
      writer->Write(header);
    }
    const grpc::Status s = writer->Finish();  // waits for the server
    const double seconds = absl::ToDoubleSeconds(absl::Now() - start);
    const grpc::StatusCode expected = sends_header
                                          ? grpc::StatusCode::DEADLINE_EXCEEDED
                                          : grpc::StatusCode::OK;
    if (s.error_code() != expected ||
        seconds > kProgressTimeoutS + kStallSlackS) {
      c.Error(absl::StrCat("stalled push: ", s.error_code(), " ",
                           s.error_message(), " after ", seconds, " s"));
      continue;
    }
    c.stalled_ended.fetch_add(1, std::memory_order_relaxed);
    const int64_t ms = static_cast<int64_t>(seconds * 1000);
    int64_t slowest = c.stalled_slowest_ms.load();
    while (ms > slowest &&
           !c.stalled_slowest_ms.compare_exchange_weak(slowest, ms)) {
    }
  }
}

// One puller: pulls the whole range over and over and checks its size.
void PullLoop(const std::string& address, const Plan& plan, uint64_t worker_id,
              const std::atomic<bool>& stop, Counters& c) {
  auto stub = NewStub(address);
  asgd::v1::PullRequest request;
  request.set_worker_id(worker_id);
  while (!stop.load(std::memory_order_relaxed)) {
    grpc::ClientContext ctx;
    SetDeadline(&ctx, std::chrono::seconds(30));
    WaitForConnection(&ctx);
    auto reader = stub->PullStream(&ctx);  // one pull per stream
    reader->Write(request);
    reader->WritesDone();
    asgd::v1::PullChunk chunk;
    int64_t bytes = 0;
    size_t chunks = 0;
    while (reader->Read(&chunk)) {
      if (chunk.end_of_pull()) continue;
      bytes += chunk.chunk().data().size();
      ++chunks;
    }
    const grpc::Status s = reader->Finish();
    if (!s.ok()) {
      c.Error(absl::StrCat("pull: ", s.error_code(), " ", s.error_message()));
      continue;
    }
    if (chunks != plan.chunks.size() ||
        bytes != plan.range_size * static_cast<int64_t>(sizeof(float))) {
      c.Error(absl::StrCat("pull: ", chunks, " chunks, ", bytes, " bytes"));
      continue;
    }
    c.pulls.fetch_add(1, std::memory_order_relaxed);
    c.bytes_pulled.fetch_add(bytes, std::memory_order_relaxed);
  }
}

// The 32 pushers, 32 pullers and 8 stallers, each on its own channel, from
// construction until Stop().
class Load {
 public:
  Load(const std::string& address, const Plan& plan, Counters& c) {
    for (int i = 0; i < kPushers; ++i) {
      clients_.emplace_back(PushLoop, address, std::cref(plan), i,
                            std::cref(stop_), std::ref(c));
    }
    for (int i = 0; i < kPullers; ++i) {
      clients_.emplace_back(PullLoop, address, std::cref(plan), 1000 + i,
                            std::cref(stop_), std::ref(c));
    }
    for (int i = 0; i < kStallers; ++i) {
      clients_.emplace_back(StallLoop, address, 2000 + i, std::cref(stop_),
                            std::ref(c));
    }
  }
  ~Load() { Stop(); }

  // Every client finishes its call in flight (a stalled one is ended by the
  // server) and closes its channel.
  void Stop() {
    stop_ = true;
    for (std::thread& t : clients_) t.join();
    clients_.clear();
  }

 private:
  std::atomic<bool> stop_{false};
  std::vector<std::thread> clients_;
};

TEST_F(SoakTest, SixtyFourStreamsKeepMemoryFlat) {
  // The model, from the server itself.
  auto desc = Describe();
  ASSERT_TRUE(desc.ok()) << desc.status();
  std::vector<TensorSpec> tensors;
  Plan plan;
  for (const auto& t : desc->tensors()) {
    TensorSpec spec{t.name(), {}};
    for (uint64_t d : t.shape()) spec.shape.push_back(static_cast<int64_t>(d));
    tensors.push_back(spec);
    plan.names.push_back(t.name());
  }
  auto layout =
      ModelLayout::Create(tensors, desc->num_servers(), desc->num_shards());
  ASSERT_TRUE(layout.ok()) << layout.status();
  const FlatRange range = layout->ServerRange(desc->server_index());
  plan.chunks = PlanChunks(*layout, range, desc->max_chunk_elements());
  plan.range_size = range.size();
  const double mb = plan.range_size * 4.0 / 1e6;
  const int64_t rss_start = RssKb(server_.pid());
  const double d = g_soak_seconds;
  std::printf(
      "soak: %s, model %lld floats (%.2f MB per push/pull), %d pushers + "
      "%d pullers for %.0f s (warm-up %.0f s)\n",
      address_.c_str(), static_cast<long long>(plan.range_size), mb, kPushers,
      kPullers, d, d * kWarmupFraction);

  // Warm-up: everything the load needs once (channels, per-worker state,
  // gRPC's and malloc's pools) is made. Then the load stops, and what the
  // server holds with no call in flight is the baseline.
  Counters c;
  bool server_alive = true;
  int64_t rss_peak = 0;
  // Samples the server's RSS every 250 ms until `until` (a measurement
  // interval, not a wait for a condition); false if the server died.
  auto sample = [&](absl::Time until, std::vector<int64_t>* window,
                    absl::Time window_from) {
    while (absl::Now() < until) {
      absl::SleepFor(std::min(absl::Milliseconds(250), until - absl::Now()));
      if (!server_.Alive()) return false;
      const int64_t rss = RssKb(server_.pid());
      rss_peak = std::max(rss_peak, rss);
      if (window != nullptr && absl::Now() >= window_from) {
        window->push_back(rss);
      }
    }
    return true;
  };
  std::vector<int64_t> warm_samples;
  {
    const absl::Time start = absl::Now();
    const absl::Time warm_at = start + absl::Seconds(d * kWarmupFraction);
    Load load(address_, plan, c);
    server_alive = sample(warm_at, &warm_samples,
                          start + absl::Seconds(d * kWarmupFraction / 2));
  }
  ASSERT_TRUE(server_alive) << "asgd_server died under load";
  const auto baseline = ReadHeld();
  ASSERT_TRUE(baseline.ok()) << baseline.status();
  std::printf("soak: after the warm-up, with no call in flight: %s\n",
              baseline->ToString().c_str());

  // The measured load. RSS is sampled for the report: under load it moves
  // with the messages in flight (64 streams x 0.5 MB, a few copies each),
  // and what a burst of them freed stays resident in malloc's arenas.
  std::vector<int64_t> end_samples;
  const int64_t pushes_warm = c.pushes_applied.load();
  const int64_t pulls_warm = c.pulls.load();
  const absl::Time warm_time = absl::Now();
  const absl::Time end_at =
      warm_time + absl::Seconds(d * (1 - kWarmupFraction));
  {
    Load load(address_, plan, c);
    server_alive = sample(end_at, &end_samples,
                          end_at - absl::Seconds(d * kWindowFraction));
  }
  const absl::Time end_time = absl::Now();
  ASSERT_TRUE(server_alive) << "asgd_server died under load";
  const int64_t pushes_end = c.pushes_applied.load();
  const int64_t pulls_end = c.pulls.load();
  ASSERT_FALSE(warm_samples.empty());
  ASSERT_FALSE(end_samples.empty());

  // Once the calls are gone the server must hold again what it held after
  // the warm-up: heap in use within kMaxHeapGrowthBytes, threads and open
  // files within a few. A leak never gets there; gRPC frees a finished call's
  // state at its own pace, so this waits for it (bounded).
  const absl::Time drain_start = absl::Now();
  absl::StatusOr<HeldState> after = ReadHeld();
  while (after.ok() && !after->WithinBoundsOf(*baseline) &&
         absl::Now() - drain_start < absl::Seconds(kDrainS)) {
    absl::SleepFor(absl::Milliseconds(100));  // polling /metrics, bounded
    after = ReadHeld();
  }
  ASSERT_TRUE(after.ok()) << after.status();
  const double drain_s = absl::ToDoubleSeconds(absl::Now() - drain_start);

  const int64_t rss_warm = Median(warm_samples);
  const int64_t rss_end = Median(end_samples);
  const double window = absl::ToDoubleSeconds(end_time - warm_time);
  const double push_rate = (pushes_end - pushes_warm) / window;
  const double pull_rate = (pulls_end - pulls_warm) / window;
  std::printf(
      "soak: %.0f s measured after warm-up: %.1f pushes/s, %.1f pulls/s "
      "(%.1f MB/s in, %.1f MB/s out)\n",
      window, push_rate, pull_rate, push_rate * mb, pull_rate * mb);
  std::printf(
      "soak: server RSS under load: start %.1f MB, warm-up %.1f MB (median "
      "of %zu samples), end %.1f MB (median of %zu), peak %.1f MB\n",
      rss_start / 1024.0, rss_warm / 1024.0, warm_samples.size(),
      rss_end / 1024.0, end_samples.size(), rss_peak / 1024.0);
  std::printf(
      "soak: after the load, with no call in flight (%.1f s after it "
      "stopped): %s; heap in use %+.1f kB since the warm-up (limit %+.0f "
      "kB)\n",
      drain_s, after->ToString().c_str(),
      (after->heap_in_use - baseline->heap_in_use) / 1024.0,
      kMaxHeapGrowthBytes / 1024.0);
  std::printf("soak: totals %lld pushes applied, %lld pulls, %lld errors\n",
              static_cast<long long>(c.pushes_applied.load()),
              static_cast<long long>(c.pulls.load()),
              static_cast<long long>(c.errors.load()));
  std::printf(
      "soak: %lld stalled push streams ended by the server (timeout %.0f s), "
      "the slowest after %.2f s\n",
      static_cast<long long>(c.stalled_ended.load()), kProgressTimeoutS,
      c.stalled_slowest_ms.load() / 1000.0);
  RecordProperty("pushes_per_s", absl::StrCat(push_rate));
  RecordProperty("pulls_per_s", absl::StrCat(pull_rate));
  RecordProperty("rss_warm_kb", absl::StrCat(rss_warm));
  RecordProperty("rss_end_kb", absl::StrCat(rss_end));
  RecordProperty("heap_growth_bytes",
                 absl::StrCat(after->heap_in_use - baseline->heap_in_use));

  {
    absl::MutexLock lock(&c.mu);
    EXPECT_EQ(c.errors.load(), 0) << "first error: " << c.first_error;
  }
  EXPECT_EQ(c.pushes_other.load(), 0);
  EXPECT_GT(c.stalled_ended.load(), 0);
  EXPECT_GT(pushes_end - pushes_warm, 0);
  EXPECT_GT(pulls_end - pulls_warm, 0);
  EXPECT_LE(after->heap_in_use, baseline->heap_in_use + kMaxHeapGrowthBytes)
      << "the server's heap in use grew from " << baseline->heap_in_use
      << " to " << after->heap_in_use << " bytes over "
      << (pushes_end - pushes_warm) + (pulls_end - pulls_warm)
      << " pushes and pulls";
  EXPECT_LE(after->threads, baseline->threads + kMaxExtraThreads);
  EXPECT_LE(after->open_fds, baseline->open_fds + kMaxExtraFds);

  // Still healthy, and every applied push is in the version.
  EXPECT_TRUE(ProbeHealth(address_, absl::Seconds(5)).ok());
  auto after_desc = Describe();
  ASSERT_TRUE(after_desc.ok()) << after_desc.status();
  EXPECT_EQ(after_desc->model_version(),
            static_cast<uint64_t>(c.pushes_applied.load()));

  const int status = server_.Stop(absl::Seconds(30));
  EXPECT_TRUE(status >= 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0)
      << "asgd_server did not exit cleanly on SIGTERM (wait status " << status
      << ")";
}

}  // namespace
}  // namespace asgd

// gtest flags first; then --server=PATH (from BUILD) and --soak_seconds=N
// (default 60, or the environment's SOAK_SECONDS).
int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  if (const char* env = std::getenv("SOAK_SECONDS"); env != nullptr) {
    if (!absl::SimpleAtod(env, &asgd::g_soak_seconds)) {
      std::fprintf(stderr, "bad SOAK_SECONDS=%s\n", env);
      return 2;
    }
  }
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg.rfind("--server=", 0) == 0) {
      asgd::g_server_path = arg.substr(9);
    } else if (arg.rfind("--soak_seconds=", 0) == 0) {
      if (!absl::SimpleAtod(arg.substr(15), &asgd::g_soak_seconds) ||
          asgd::g_soak_seconds < 4) {
        std::fprintf(stderr, "--soak_seconds wants a number >= 4\n");
        return 2;
      }
    } else {
      std::fprintf(stderr, "unknown argument %s\n", arg.c_str());
      return 2;
    }
  }
  return RUN_ALL_TESTS();
}
