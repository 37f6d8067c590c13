// server_capacity_bench: how many pushes one server process can take for the
// seed's DNN (440 inputs, 5 hidden layers of 2048, 2000 outputs: 21.8 M
// parameters, 87 MB), per push encoding, with the pull pattern workers use.
//
//   bazel run //bench:server_capacity_bench
//   server_capacity_bench --workers=1,2,4 --duration_s=2 --compute_ms=50
//   server_capacity_bench --push_encodings=fp32,onebit --pulls=overlapped
//   server_capacity_bench --hidden=64,64 --num_classes=10 --duration_s=0.2
//
// The server runs in a child process (--server_process, the default), so its
// CPU time is measured apart from the workers': W simulated workers
// (threads of this process, each with its own GrpcParamClient, as a worker
// process would have) push a fixed gradient as fast as they can (or after
// --compute_ms of sleep per step), encoded as each of --push_encodings (the
// client's real encoders, error feedback included), and pull the model
// (--wire_dtype) in one of two patterns (--pulls):
//   every_push  a pull after every push, waited for (the worker before pulls
//               overlapped compute);
//   overlapped  the worker's current pattern (worker/ps/trainer.h): the next
//               model is pulled in the background after each push
//               (ModelPrefetcher), and the worker waits for it only when it
//               is --max_overlapped_steps pushes ahead of it;
//   none        no pulls after the first: the server's capacity for pushes
//               alone (--pulls=none is not among the defaults).
// Pulls are delta pulls, as the worker's (--delta_pulls, default true): the
// server sends the compressed updates since the worker's exact copy where
// its update log has them (after 1-bit and top-k pushes), the weights
// otherwise (after float32 and bf16 pushes); the "pulls as updates" column
// counts the former.
// Points run in the order pattern, workers, round, encoding, so encodings
// are compared back to back; the best of --rounds is shown.
//
// Per point: pushes/s = pushes / wall (from the start to the last worker's
// end, background pulls included), and its ratio to the fp32 point of the
// same pattern and workers; pulls per push; wire bytes per push (chunk data
// the client wrote); the server process's CPU per push (core-ms, pulls
// included): the server's capacity per core is 1000 / that; and cores busy
// in the server and in this process (the workers: encoding, decoding pulls).
// On a small machine server and workers share the cores: pushes/s is the
// capacity of both together, the server core-ms per push that of the server.
//
// Output: a markdown table and `csv,capacity,...` lines.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "bench/bench_util.h"
#include "common/chunking.h"
#include "common/wire_codec.h"
#include "model/model_spec.h"
#include "server/grpc_server.h"
#include "server/model_options.h"
#include "server/param_store.h"
#include "worker/ps/grpc_param_client.h"
#include "worker/ps/model_prefetcher.h"

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
ABSL_FLAG(std::string, push_encodings, "fp32,bf16,onebit,topk",
          "Comma-separated push encodings: fp32, bf16, onebit, topk.");
ABSL_FLAG(double, top_k_fraction, 0.01, "topk: the share of elements sent.");
ABSL_FLAG(std::string, wire_dtype, "fp32",
          "Encoding of pulled weights: fp32 or bf16.");
ABSL_FLAG(std::string, pulls, "every_push,overlapped",
          "Comma-separated pull patterns: every_push, overlapped, none.");
ABSL_FLAG(int, max_overlapped_steps, 1,
          "overlapped: pushes on one model while the next is on the wire "
          "before the worker waits for it.");
ABSL_FLAG(bool, server_process, true,
          "Run the server in a child process and report its CPU apart.");
ABSL_FLAG(int, rounds, 1, "Measurements per point; the best is shown.");
ABSL_FLAG(bool, delta_pulls, true,
          "Workers ask for delta pulls (the worker's default): the server "
          "sends the compressed updates since the worker's exact copy when it "
          "can, the weights otherwise (always after float32 or bf16 pushes). "
          "false: every pull sends the weights.");
ABSL_FLAG(int, replay_threads, 0,
          "Threads replaying one server's updates in each worker's delta "
          "pulls (0: the worker's default, by the machine's cores).");
ABSL_FLAG(float, momentum, 0.0f, "Server momentum (0: plain SGD).");
ABSL_FLAG(int64_t, chunk_elements, asgd::kDefaultMaxChunkElements,
          "Server max_chunk_elements (floats per chunk, at most 786432).");
ABSL_FLAG(double, saturation_gain, 1.2,
          "Saturated: pushes/s grows by less than this factor from the "
          "previous worker count.");

namespace asgd::bench {
namespace {

int Fail(const absl::Status& status) {
  std::fprintf(stderr, "server_capacity_bench: %s\n",
               status.ToString().c_str());
  return 1;
}

enum class Pulls { kEveryPush = 0, kOverlapped = 1, kNone = 2 };

const char* PullsName(Pulls p) {
  switch (p) {
    case Pulls::kEveryPush:
      return "every_push";
    case Pulls::kOverlapped:
      return "overlapped";
    case Pulls::kNone:
      break;
  }
  return "none";
}

struct WorkerStats {
  int64_t pushes = 0;
  int64_t pulls = 0;
  int64_t busy = 0;    // pushes refused as overloaded
  double push_s = 0;   // in Push calls
  double wait_s = 0;   // waiting for pulls
  int64_t bytes = 0;   // push chunk data written
  int64_t update_pulls = 0;  // pulls answered with updates only
  absl::Status status;
};

struct Row {
  Pulls pulls = Pulls::kEveryPush;
  int workers = 0;
  PushEncoding encoding = PushEncoding::kFloat32;
  int64_t pushes = 0;
  int64_t pull_count = 0;
  int64_t busy = 0;
  double wall_s = 0;
  double pushes_per_s = 0;
  double wire_bytes_per_push = 0;
  double push_ms = 0;       // mean Push call
  double wait_ms = 0;       // waiting for pulls, per push
  double server_cores = -1;  // server CPU / wall (-1: not measured)
  double server_ms_per_push = -1;
  double client_cores = 0;  // this process's CPU / wall
  int64_t update_pulls = 0;
};

// The server, in a child process or in this one.
class Server {
 public:
  static absl::StatusOr<std::unique_ptr<Server>> Start(
      const ParamStoreOptions& options, const std::vector<float>& initial,
      bool child) {
    auto server = std::unique_ptr<Server>(new Server());
    if (!child) {
      auto started = GrpcServer::Start(options, initial, "127.0.0.1", 0);
      if (!started.ok()) return started.status();
      server->port_ = (*started)->port();
      server->in_process_ = std::move(*started);
      return server;
    }
    int port_pipe[2], stop_pipe[2];
    if (pipe(port_pipe) != 0 || pipe(stop_pipe) != 0) {
      return absl::InternalError("pipe failed");
    }
    const pid_t pid = fork();
    if (pid < 0) return absl::InternalError("fork failed");
    if (pid == 0) {
      // The child: serve until the parent closes the stop pipe.
      close(port_pipe[0]);
      close(stop_pipe[1]);
      int port = 0;
      auto started = GrpcServer::Start(options, initial, "127.0.0.1", 0);
      if (started.ok()) port = (*started)->port();
      if (write(port_pipe[1], &port, sizeof(port)) != sizeof(port)) _exit(1);
      char c;
      while (read(stop_pipe[0], &c, 1) > 0) {
      }
      if (started.ok()) (*started)->Shutdown(absl::Seconds(1));
      _exit(started.ok() ? 0 : 1);
    }
    close(port_pipe[1]);
    close(stop_pipe[0]);
    server->pid_ = pid;
    server->stop_fd_ = stop_pipe[1];
    int port = 0;
    const bool got = read(port_pipe[0], &port, sizeof(port)) == sizeof(port);
    close(port_pipe[0]);
    if (!got || port == 0) {
      return absl::UnavailableError("the server process did not start");
    }
    server->port_ = port;
    return server;
  }

  ~Server() {
    if (in_process_ != nullptr) in_process_->Shutdown(absl::Seconds(1));
    if (pid_ > 0) {
      close(stop_fd_);
      int status;
      waitpid(pid_, &status, 0);
    }
  }

  std::string address() const { return absl::StrCat("127.0.0.1:", port_); }
  // CPU seconds of the server process so far; -1 in-process.
  double CpuSeconds() const { return pid_ > 0 ? ProcessCpuSeconds(pid_) : -1; }

 private:
  Server() = default;
  int port_ = 0;
  pid_t pid_ = -1;
  int stop_fd_ = -1;
  std::unique_ptr<GrpcServer> in_process_;
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
  const int max_overlapped = absl::GetFlag(FLAGS_max_overlapped_steps);
  const int rounds = absl::GetFlag(FLAGS_rounds);
  if (duration < 0 || compute_ms < 0 || max_overlapped < 1 || rounds < 1) {
    return Fail(absl::InvalidArgumentError(
        "--duration_s and --compute_ms must be >= 0, "
        "--max_overlapped_steps and --rounds >= 1"));
  }
  std::vector<PushEncoding> encodings;
  for (absl::string_view e : absl::StrSplit(
           absl::GetFlag(FLAGS_push_encodings), ',', absl::SkipEmpty())) {
    auto encoding = ParsePushEncoding(e);
    if (!encoding.ok()) return Fail(encoding.status());
    encodings.push_back(*encoding);
  }
  std::vector<Pulls> patterns;
  for (absl::string_view p :
       absl::StrSplit(absl::GetFlag(FLAGS_pulls), ',', absl::SkipEmpty())) {
    if (p == "every_push") {
      patterns.push_back(Pulls::kEveryPush);
    } else if (p == "overlapped") {
      patterns.push_back(Pulls::kOverlapped);
    } else if (p == "none") {
      patterns.push_back(Pulls::kNone);
    } else {
      return Fail(absl::InvalidArgumentError(absl::StrCat(
          "--pulls: unknown pattern '", p,
          "' (every_push, overlapped, none)")));
    }
  }
  auto wire_dtype = ParseWireDtype(absl::GetFlag(FLAGS_wire_dtype));
  if (!wire_dtype.ok()) return Fail(wire_dtype.status());
  if (encodings.empty() || patterns.empty()) {
    return Fail(absl::InvalidArgumentError(
        "--push_encodings and --pulls must name at least one"));
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
  const bool child = absl::GetFlag(FLAGS_server_process);

  PrintMachine("server_capacity_bench");
  std::printf(
      "# model %s: %lld parameters (%.1f MB); server: %d shard(s), %s, %s; "
      "workers: threads with a GrpcParamClient each (streams), sleep %d ms -> "
      "push, pulls of %s weights%s; %.1f s per point, best of %d\n",
      DescribeModel(spec).c_str(), static_cast<long long>(n), 4.0 * n / 1e6,
      options.num_shards,
      options.optimizer.momentum > 0 ? "momentum SGD" : "plain SGD",
      child ? "its own process" : "in this process",
      compute_ms, std::string(WireDtypeName(*wire_dtype)).c_str(),
      absl::GetFlag(FLAGS_delta_pulls) ? " (delta pulls)" : "", duration,
      rounds);
  // Before any gRPC thread exists: the child is forked here.
  auto server = Server::Start(options, initial, child);
  if (!server.ok()) return Fail(server.status());

  // One gradient for all workers (pushes only read it): small values of both
  // signs, as a real gradient's.
  std::vector<float> gradient(n);
  {
    std::mt19937 rng(7);
    std::normal_distribution<float> dist(0.0f, 1e-3f);
    for (float& x : gradient) x = dist(rng);
  }
  std::vector<std::vector<float>> models(max_workers, std::vector<float>(n));

  std::printf(
      "\n| pulls | workers | encoding | pushes/s | × fp32 | pulls per push | "
      "wire MB per push | mean push ms | pull wait ms per push | server "
      "cores | server core-ms per push | × fp32 (server) | worker cores | "
      "busy | pulls as updates |\n"
      "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
  std::vector<Row> rows;
  // fp32 pushes/s and server core-ms per (pattern, workers), for the ratios.
  std::map<std::pair<int, int>, std::pair<double, double>> fp32;
  for (Pulls pattern : patterns) {
    for (int W : *worker_counts) {
      std::vector<Row> best(encodings.size());
      for (int round = 0; round < rounds; ++round) {
        for (size_t e = 0; e < encodings.size(); ++e) {
          const PushEncoding encoding = encodings[e];
          std::vector<std::unique_ptr<GrpcParamClient>> clients;
          for (int w = 0; w < W; ++w) {
            PoolClientOptions copts;
            copts.worker_id = w;
            copts.connect_timeout = absl::Seconds(30);
            copts.rpc_timeout = absl::Seconds(300);
            copts.wire_dtype = *wire_dtype;
            copts.push_encoding = encoding;
            copts.top_k_fraction = absl::GetFlag(FLAGS_top_k_fraction);
            copts.delta_pulls = absl::GetFlag(FLAGS_delta_pulls);
            copts.replay_threads = absl::GetFlag(FLAGS_replay_threads);
            auto client =
                GrpcParamClient::Create({(*server)->address()}, copts);
            if (!client.ok()) return Fail(client.status());
            clients.push_back(std::move(*client));
          }
          StartGate gate(W);
          double cpu0 = 0, server_cpu0 = 0;
          std::vector<WorkerStats> stats(W);
          std::vector<Clock::time_point> starts(W), ends(W);
          std::vector<std::thread> threads;
          for (int w = 0; w < W; ++w) {
            threads.emplace_back([&, w] {
              WorkerStats& st = stats[w];
              GrpcParamClient* client = clients[w].get();
              std::vector<uint64_t> versions;
              st.status = client->Pull(absl::MakeSpan(models[w]), &versions);
              std::unique_ptr<ModelPrefetcher> prefetcher;
              if (pattern == Pulls::kOverlapped) {
                prefetcher = std::make_unique<ModelPrefetcher>(client, n);
              }
              const int64_t bytes0 = client->push_bytes_sent();
              const Clock::time_point t0 = gate.Arrive();
              starts[w] = t0;
              if (w == 0) {
                cpu0 = ProcessCpuSeconds();
                server_cpu0 = (*server)->CpuSeconds();
              }
              int steps_on_model = 0;
              while (st.status.ok() &&
                     SecondsBetween(t0, Clock::now()) < duration) {
                if (compute_ms > 0) {
                  absl::SleepFor(absl::Milliseconds(compute_ms));
                }
                if (prefetcher != nullptr) {
                  const Clock::time_point w0 = Clock::now();
                  const bool wait = steps_on_model >= max_overlapped &&
                                    prefetcher->pull_in_flight();
                  auto taken = wait ? prefetcher->Wait(&models[w], &versions)
                                    : prefetcher->TakeIfReady(&models[w],
                                                              &versions);
                  if (!taken.ok()) {
                    st.status = taken.status();
                    break;
                  }
                  if (*taken) steps_on_model = 0;
                  st.wait_s += SecondsBetween(w0, Clock::now());
                }
                const Clock::time_point p0 = Clock::now();
                auto pushed = client->Push(gradient, versions, 1);
                const Clock::time_point p1 = Clock::now();
                if (!pushed.ok()) {
                  // Refused as overloaded: an answer, not a failure.
                  if (pushed.status().code() != absl::StatusCode::kUnavailable) {
                    st.status = pushed.status();
                    break;
                  }
                  ++st.busy;
                } else {
                  ++st.pushes;
                  st.push_s += SecondsBetween(p0, p1);
                }
                if (prefetcher != nullptr) {
                  ++steps_on_model;
                  prefetcher->Request();
                } else if (pattern == Pulls::kEveryPush) {
                  st.status =
                      client->Pull(absl::MakeSpan(models[w]), &versions);
                  ++st.pulls;
                  st.wait_s += SecondsBetween(p1, Clock::now());
                }
              }
              if (prefetcher != nullptr) {
                // The pull in flight finishes inside the measured time.
                auto last = prefetcher->Wait(&models[w], &versions);
                if (st.status.ok() && !last.ok()) st.status = last.status();
                st.pulls = prefetcher->pulls();
                prefetcher.reset();
              }
              st.bytes = client->push_bytes_sent() - bytes0;
              st.update_pulls = client->update_pulls();
              ends[w] = Clock::now();
            });
          }
          for (std::thread& t : threads) t.join();
          Row row;
          row.pulls = pattern;
          row.workers = W;
          row.encoding = encoding;
          const double cpu_s = ProcessCpuSeconds() - cpu0;
          const double server_cpu_s = (*server)->CpuSeconds() - server_cpu0;
          double push_s = 0, wait_s = 0;
          int64_t bytes = 0;
          for (const WorkerStats& st : stats) {
            if (!st.status.ok()) return Fail(st.status);
            row.pushes += st.pushes;
            row.pull_count += st.pulls;
            row.busy += st.busy;
            row.update_pulls += st.update_pulls;
            push_s += st.push_s;
            wait_s += st.wait_s;
            bytes += st.bytes;
          }
          row.wall_s = SecondsBetween(
              starts[0], *std::max_element(ends.begin(), ends.end()));
          row.pushes_per_s = row.pushes / row.wall_s;
          row.client_cores = cpu_s / row.wall_s;
          if (child) {
            row.server_cores = server_cpu_s / row.wall_s;
            row.server_ms_per_push =
                row.pushes > 0 ? 1e3 * server_cpu_s / row.pushes : 0;
          }
          row.push_ms = row.pushes > 0 ? 1e3 * push_s / row.pushes : 0;
          row.wait_ms = row.pushes > 0 ? 1e3 * wait_s / row.pushes : 0;
          row.wire_bytes_per_push =
              row.pushes + row.busy > 0
                  ? static_cast<double>(bytes) / (row.pushes + row.busy)
                  : 0;
          if (row.pushes_per_s > best[e].pushes_per_s) best[e] = row;
        }
      }
      for (size_t e = 0; e < encodings.size(); ++e) {
        const Row& row = best[e];
        if (row.encoding == PushEncoding::kFloat32) {
          fp32[{static_cast<int>(pattern), W}] = {row.pushes_per_s,
                                                  row.server_ms_per_push};
        }
      }
      for (const Row& row : best) {
        const auto it = fp32.find({static_cast<int>(pattern), W});
        const double ratio = it != fp32.end() && it->second.first > 0
                                 ? row.pushes_per_s / it->second.first
                                 : 0;
        const double server_ratio =
            it != fp32.end() && row.server_ms_per_push > 0
                ? it->second.second / row.server_ms_per_push
                : 0;
        std::printf(
            "| %s | %d | %s | %.2f | %.2f | %.2f | %.3f | %.1f | %.1f | %.2f | "
            "%.1f | %.2f | %.2f | %lld | %lld |\n",
            PullsName(row.pulls), row.workers,
            std::string(PushEncodingName(row.encoding)).c_str(),
            row.pushes_per_s, ratio,
            row.pushes > 0 ? static_cast<double>(row.pull_count) / row.pushes
                           : 0,
            row.wire_bytes_per_push / 1e6, row.push_ms, row.wait_ms,
            row.server_cores, row.server_ms_per_push, server_ratio,
            row.client_cores, static_cast<long long>(row.busy),
            static_cast<long long>(row.update_pulls));
        std::fflush(stdout);
        rows.push_back(row);
      }
    }
  }
  server->reset();

  std::printf(
      "\n# csv,capacity,pulls(0 every_push 1 overlapped 2 none),workers,encoding(0 "
      "fp32 1 bf16 2 onebit 3 topk),compute_ms,pushes,pulls,wall_s,"
      "pushes_per_s,ratio_to_fp32,wire_bytes_per_push,push_ms,pull_wait_ms,"
      "server_cores,server_core_ms_per_push,worker_cores,busy\n");
  for (const Row& r : rows) {
    const auto it = fp32.find({static_cast<int>(r.pulls), r.workers});
    const double ratio = it != fp32.end() && it->second.first > 0
                             ? r.pushes_per_s / it->second.first
                             : 0;
    std::printf(
        "csv,capacity,%d,%d,%d,%d,%lld,%lld,%.3f,%.3f,%.3f,%.0f,%.2f,%.2f,"
        "%.3f,%.2f,%.3f,%lld\n",
        static_cast<int>(r.pulls), r.workers, static_cast<int>(r.encoding),
        compute_ms, static_cast<long long>(r.pushes),
        static_cast<long long>(r.pull_count), r.wall_s, r.pushes_per_s, ratio,
        r.wire_bytes_per_push, r.push_ms, r.wait_ms, r.server_cores,
        r.server_ms_per_push, r.client_cores, static_cast<long long>(r.busy));
  }
  const double gain = absl::GetFlag(FLAGS_saturation_gain);
  for (Pulls pattern : patterns) {
    for (PushEncoding encoding : encodings) {
      double peak = 0, previous = 0;
      int saturated_at = 0;
      bool first = true;
      for (const Row& r : rows) {
        if (r.pulls != pattern || r.encoding != encoding) continue;
        peak = std::max(peak, r.pushes_per_s);
        if (!first && saturated_at == 0 &&
            r.pushes_per_s < gain * previous) {
          saturated_at = r.workers;
        }
        previous = r.pushes_per_s;
        first = false;
      }
      std::printf(
          "# saturation (%s pulls, %s pushes): %s; peak %.2f pushes/s\n",
          PullsName(pattern), std::string(PushEncodingName(encoding)).c_str(),
          saturated_at > 0
              ? absl::StrCat("pushes/s grows less than ", gain,
                             "x from the previous worker count at ",
                             saturated_at, " workers")
                    .c_str()
              : "not reached",
          peak);
    }
  }
  std::printf("# server_capacity_bench: load average at end: %s\n",
              LoadAverage().c_str());
  return 0;
}

}  // namespace
}  // namespace asgd::bench

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "How many pushes one asgd server process takes for the seed DNN, per "
      "push encoding and pull pattern. Workers use the long-lived "
      "PushStream/PullStream, the only transport (per-call Push and Pull are "
      "retired: --transport is gone).\nExample: server_capacity_bench "
      "--workers=1,2,4 --duration_s=2");
  absl::ParseCommandLine(argc, argv);
  return asgd::bench::Run();
}
