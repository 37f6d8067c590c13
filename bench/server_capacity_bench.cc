// server_capacity_bench: how many workers one server process can feed. An
// in-process GrpcServer holds the seed's DNN (440 inputs, 5 hidden layers of
// 2048, 2000 outputs: 21.8 M parameters, 87 MB); W simulated workers (threads,
// each with its own GrpcParamClient) loop pull -> [simulated compute] -> push
// without computing a gradient, for W = 1, 2, 4, 8.
//
//   bazel run //bench:server_capacity_bench
//   server_capacity_bench --workers=1,2,4 --duration_s=2 --compute_ms=50
//   server_capacity_bench --hidden=64,64 --num_classes=10 --duration_s=0.2
//
// Each point: every worker pulls once (untimed), then all start together and
// loop until --duration_s has passed; a loop that started before the deadline
// finishes. pushes/s = pushes / wall (start to the last worker's end). A worker
// "computes" by sleeping --compute_ms (0: pure transport, the server's and the
// loopback's capacity). Scaling = pushes/s(W) / (W x pushes/s(1)); the server
// is called saturated at the first W whose pushes/s is less than
// --saturation_gain x that of the previous W.
//
// The server, its shards and every worker share this machine's cores: on a
// small machine this measures the capacity of client + server together, which
// the report says. "cores busy" = process CPU seconds / wall seconds.
//
// Output: a markdown table and `csv,capacity,...` lines.
#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "bench/bench_util.h"
#include "common/chunking.h"
#include "model/model_spec.h"
#include "common/wire_codec.h"
#include "server/grpc_server.h"
#include "server/model_options.h"
#include "server/param_store.h"
#include "worker/ps/grpc_param_client.h"

ABSL_FLAG(std::string, workers, "1,2,4,8",
          "Comma-separated numbers of simulated workers.");
ABSL_FLAG(double, duration_s, 3.0, "Timed seconds per point.");
ABSL_FLAG(int, compute_ms, 0,
          "Simulated compute time per step (sleep) before each push.");
ABSL_FLAG(int, input_dim, 440, "Model inputs.");
ABSL_FLAG(std::string, hidden, "2048,2048,2048,2048,2048",
          "Hidden layer widths.");
ABSL_FLAG(int, num_classes, 2000, "Model outputs.");
ABSL_FLAG(int, shards, 2, "Server shards (apply threads).");
ABSL_FLAG(std::string, wire_dtype, "fp32",
          "Wire encoding of the workers' pushes and pulls: fp32 or bf16.");
ABSL_FLAG(float, momentum, 0.0f, "Server momentum (0: plain SGD).");
ABSL_FLAG(int64_t, chunk_elements, asgd::kDefaultMaxChunkElements,
          "Server max_chunk_elements (floats per chunk, at most 786432).");
ABSL_FLAG(double, saturation_gain, 1.2,
          "Saturated: pushes/s grows by less than this factor from the "
          "previous worker count.");

namespace asgd::bench {
namespace {

constexpr double kGB = 1e9;

int Fail(const absl::Status& status) {
  std::fprintf(stderr, "server_capacity_bench: %s\n",
               status.ToString().c_str());
  return 1;
}

struct WorkerStats {
  int64_t pushes = 0;
  int64_t pulls = 0;
  double push_s = 0;
  double pull_s = 0;
  absl::Status status;
};

struct Row {
  int workers = 0;
  int64_t pushes = 0;
  double wall_s = 0;
  double pushes_per_s = 0;
  double gbps = 0;     // push + pull payload bytes / s
  double push_ms = 0;  // mean Push call
  double pull_ms = 0;  // mean Pull call
  double scaling = 0;  // pushes/s(W) / (W * pushes/s(1))
  double cores = 0;    // process CPU seconds / wall seconds
  uint64_t rejected_busy = 0;
};

int Run() {
  // The DNN, as a model of one row of input_dim values.
  ModelSpec spec;
  spec.feature_dim = absl::GetFlag(FLAGS_input_dim);
  spec.context = 0;
  spec.num_classes = absl::GetFlag(FLAGS_num_classes);
  auto hidden = ParseLayerSizes(absl::GetFlag(FLAGS_hidden));
  if (!hidden.ok()) return Fail(hidden.status());
  for (int h : *hidden) spec.layers.push_back(LayerSpec::Dense(h, Activation::kRelu));
  if (absl::Status s = ValidateModelSpec(spec); !s.ok()) return Fail(s);
  auto worker_counts = ParseCountList("workers", absl::GetFlag(FLAGS_workers));
  if (!worker_counts.ok()) return Fail(worker_counts.status());
  const double duration = absl::GetFlag(FLAGS_duration_s);
  const int compute_ms = absl::GetFlag(FLAGS_compute_ms);
  if (duration < 0 || compute_ms < 0) {
    return Fail(absl::InvalidArgumentError(
        "--duration_s and --compute_ms must be >= 0"));
  }

  ParamStoreOptions options;
  SetModel(spec, &options);
  options.num_shards = absl::GetFlag(FLAGS_shards);
  options.optimizer.learning_rate = 0.01f;
  options.optimizer.momentum = absl::GetFlag(FLAGS_momentum);
  options.max_chunk_elements = absl::GetFlag(FLAGS_chunk_elements);
  const int max_workers =
      *std::max_element(worker_counts->begin(), worker_counts->end());
  options.queue_capacity = std::max(32, 2 * max_workers);
  const std::vector<float> initial = InitialParams(spec, 1);
  const int64_t n = initial.size();
  const double bytes = 4.0 * n;

  PrintMachine("server_capacity_bench");
  std::printf(
      "# model %s: %lld parameters (%.1f MB); server: %d shard(s), "
      "%s; workers: threads with a GrpcParamClient each, pull -> sleep %d ms "
      "-> push, %.1f s per point\n",
      DescribeModel(spec).c_str(), static_cast<long long>(n), bytes / 1e6, options.num_shards,
      options.optimizer.momentum > 0 ? "momentum SGD" : "plain SGD", compute_ms,
      duration);

  auto wire_dtype = ParseWireDtype(absl::GetFlag(FLAGS_wire_dtype));
  if (!wire_dtype.ok()) return Fail(wire_dtype.status());
  std::printf("# wire encoding: %s (GB/s below count float32 model bytes)\n",
              std::string(WireDtypeName(*wire_dtype)).c_str());
  auto server = GrpcServer::Start(options, initial, "127.0.0.1", 0);
  if (!server.ok()) return Fail(server.status());
  std::vector<std::unique_ptr<GrpcParamClient>> clients;
  for (int w = 0; w < max_workers; ++w) {
    PoolClientOptions copts;
    copts.worker_id = w;
    copts.connect_timeout = absl::Seconds(10);
    copts.rpc_timeout = absl::Seconds(300);
    copts.wire_dtype = *wire_dtype;
    auto client = GrpcParamClient::Create({(*server)->local_address()}, copts);
    if (!client.ok()) return Fail(client.status());
    clients.push_back(std::move(*client));
  }
  // One gradient shared by all workers (pushes only read it); a model per
  // worker.
  const std::vector<float> gradient(n, 1e-6f);
  std::vector<std::vector<float>> models(max_workers, std::vector<float>(n));
  std::vector<std::vector<uint64_t>> versions(max_workers);

  std::printf(
      "\n| workers | pushes | pushes/s | push+pull GB/s | mean push ms | "
      "mean pull ms | scaling vs 1 worker | busy rejections | cores busy |\n"
      "|---|---|---|---|---|---|---|---|---|\n");
  std::vector<Row> rows;
  for (int W : *worker_counts) {
    const uint64_t busy_before =
        (*server)->store()->stats().rejected[static_cast<int>(
            RejectReason::kBusy)];
    StartGate gate(W);
    double cpu0 = 0;
    std::vector<WorkerStats> stats(W);
    std::vector<Clock::time_point> starts(W), ends(W);
    std::vector<std::thread> threads;
    for (int w = 0; w < W; ++w) {
      threads.emplace_back([&, w] {
        WorkerStats& st = stats[w];
        st.status = clients[w]->Pull(absl::MakeSpan(models[w]), &versions[w]);
        const Clock::time_point t0 = gate.Arrive();
        starts[w] = t0;
        if (w == 0) cpu0 = ProcessCpuSeconds();
        while (st.status.ok() && SecondsBetween(t0, Clock::now()) < duration) {
          if (compute_ms > 0) absl::SleepFor(absl::Milliseconds(compute_ms));
          const Clock::time_point p0 = Clock::now();
          auto pushed = clients[w]->Push(gradient, versions[w], 1);
          const Clock::time_point p1 = Clock::now();
          if (!pushed.ok()) {
            // Busy (queues full) is an answer, not a failure: count and go on.
            if (pushed.status().code() != absl::StatusCode::kUnavailable) {
              st.status = pushed.status();
              break;
            }
          } else {
            ++st.pushes;
            st.push_s += SecondsBetween(p0, p1);
          }
          st.status = clients[w]->Pull(absl::MakeSpan(models[w]), &versions[w]);
          ++st.pulls;
          st.pull_s += SecondsBetween(p1, Clock::now());
        }
        ends[w] = Clock::now();
      });
    }
    for (std::thread& t : threads) t.join();
    Row row;
    row.workers = W;
    const double cpu_s = ProcessCpuSeconds() - cpu0;
    int64_t pulls = 0;
    double push_s = 0, pull_s = 0;
    for (const WorkerStats& st : stats) {
      if (!st.status.ok()) return Fail(st.status);
      row.pushes += st.pushes;
      pulls += st.pulls;
      push_s += st.push_s;
      pull_s += st.pull_s;
    }
    row.wall_s =
        SecondsBetween(starts[0], *std::max_element(ends.begin(), ends.end()));
    row.pushes_per_s = row.pushes / row.wall_s;
    row.cores = cpu_s / row.wall_s;
    row.gbps = bytes * (row.pushes + pulls) / row.wall_s / kGB;
    row.push_ms = row.pushes > 0 ? 1e3 * push_s / row.pushes : 0;
    row.pull_ms = pulls > 0 ? 1e3 * pull_s / pulls : 0;
    row.rejected_busy = (*server)->store()->stats().rejected[static_cast<int>(
                            RejectReason::kBusy)] -
                        busy_before;
    if (!rows.empty() && rows.front().workers == 1) {
      row.scaling = row.pushes_per_s / (W * rows.front().pushes_per_s);
    } else if (W == 1) {
      row.scaling = 1.0;
    }
    std::printf(
        "| %d | %lld | %.2f | %.3f | %.1f | %.1f | %.2f | %llu | %.2f |\n", W,
        static_cast<long long>(row.pushes), row.pushes_per_s, row.gbps,
        row.push_ms, row.pull_ms, row.scaling,
        static_cast<unsigned long long>(row.rejected_busy), row.cores);
    std::fflush(stdout);
    rows.push_back(row);
  }
  clients.clear();
  (*server)->Shutdown(absl::Seconds(1));

  std::printf(
      "\n# csv,capacity,workers,compute_ms,pushes,wall_s,pushes_per_s,gbps,"
      "push_ms,pull_ms,scaling,busy_rejections,cores\n");
  for (const Row& r : rows) {
    std::printf(
        "csv,capacity,%d,%d,%lld,%.3f,%.3f,%.4f,%.2f,%.2f,%.3f,%llu,%.3f\n",
        r.workers, compute_ms, static_cast<long long>(r.pushes), r.wall_s,
        r.pushes_per_s, r.gbps, r.push_ms, r.pull_ms, r.scaling,
        static_cast<unsigned long long>(r.rejected_busy), r.cores);
  }
  const double gain = absl::GetFlag(FLAGS_saturation_gain);
  int saturated_at = 0;
  double peak = 0;
  for (size_t i = 0; i < rows.size(); ++i) {
    peak = std::max(peak, rows[i].pushes_per_s);
    if (saturated_at == 0 && i > 0 &&
        rows[i].pushes_per_s < gain * rows[i - 1].pushes_per_s) {
      saturated_at = rows[i].workers;
    }
  }
  if (saturated_at > 0) {
    std::printf(
        "# saturation: pushes/s grows less than %.2fx from the previous "
        "worker count at %d workers; peak %.2f pushes/s\n",
        gain, saturated_at, peak);
  } else {
    std::printf(
        "# saturation: not reached up to %d workers; peak %.2f "
        "pushes/s\n",
        rows.back().workers, peak);
  }
  std::printf("# server_capacity_bench: load average at end: %s\n",
              LoadAverage().c_str());
  return 0;
}

}  // namespace
}  // namespace asgd::bench

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "How many simulated workers one asgd server process can feed "
      "(pushes/s vs workers).\nExample: server_capacity_bench --workers=1,2,4 "
      "--duration_s=2");
  absl::ParseCommandLine(argc, argv);
  return asgd::bench::Run();
}
