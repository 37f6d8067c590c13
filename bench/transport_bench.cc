// transport_bench: push+pull throughput of asgd's gRPC transport over loopback
// against raw TCP loopback throughput measured by the same process in the same
// run, for several payload sizes and numbers of concurrent streams.
//
//   bazel run //bench:transport_bench                       # full grid
//   transport_bench --payloads=1M,16M --streams=1,4 --min_time_s=0.3
//   transport_bench --payloads=16M --chunk_elements=65536,262144,786432
//   transport_bench --payloads=16M --wire_dtypes=fp32,bf16
//
// gRPC: for each payload P and --chunk_elements value, an in-process
// GrpcServer (ParamStore with --shards shards, plain SGD) serves a model of
// two tensors holding P bytes in all. Each of S streams is its own
// GrpcParamClient (the worker's real client) and repeats Push(gradient of P
// bytes) then Pull(P bytes); a push is applied by the server before it
// answers, exactly as in training.
// Raw TCP: S loopback connections; on each, the client writes P bytes, a
// server thread reads them all and writes P bytes back, and the client reads
// them. Same bytes per iteration (2P), same buffers' sizes, same process.
//
// Each measurement starts all S streams at once and runs until --min_time_s has
// passed and every stream did at least --min_iters iterations; throughput is
//   GB/s = 2 * P * (iterations of all streams) / wall time / 1e9
// (wall time: start to the end of the last stream). For each point the TCP
// and gRPC measurements run back to back, --rounds times alternating; the best
// of each is reported, so both see the same machine state as far as possible.
// push/pull GB/s split the gRPC time by call: S * P / (mean call time).
// P is always the model's float32 size: with --wire_dtypes=bf16 the gRPC
// transport moves half of those bytes (2 per parameter) and its GB/s are
// parameters/s x 4, comparable with float32 and with raw TCP moving P bytes.
// "cores busy" = this process's CPU seconds / wall seconds during the
// measurement (client and server threads together): near the machine's core
// count means the point is CPU-bound.
//
// Output: a markdown table and `csv,transport,...` lines; a closing summary
// against the target (gRPC/TCP >= 0.9 at >= 1 MiB) that is reported,
// never enforced.

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "bench/bench_util.h"
#include "bench/tcp_loopback.h"
#include "common/model_layout.h"
#include "common/wire_codec.h"
#include "model/model_spec.h"
#include "server/grpc_server.h"
#include "server/model_options.h"
#include "server/param_store.h"
#include "worker/ps/grpc_param_client.h"

ABSL_FLAG(
    std::string, payloads, "64K,1M,16M,256M",
    "Comma-separated payload sizes (bytes per push and per pull; K/M/G "
    "suffixes are powers of 1024). Each is rounded down to whole floats.");
ABSL_FLAG(std::string, streams, "1,2,4,8",
          "Comma-separated numbers of concurrent streams (gRPC clients, TCP "
          "connections).");
ABSL_FLAG(std::string, chunk_elements, "262144",
          "Comma-separated server max_chunk_elements values (floats per "
          "TensorChunk; the client follows the server; at most 786432). "
          "Several values measure the chunk-size sensitivity.");
ABSL_FLAG(std::string, wire_dtypes, "fp32",
          "Comma-separated wire encodings for the gRPC client: fp32, bf16.");
ABSL_FLAG(int, shards, 2, "Shards (apply threads) of the server.");
ABSL_FLAG(double, min_time_s, 0.5,
          "Each measurement runs at least this long (seconds).");
ABSL_FLAG(int, min_iters, 1,
          "Each stream does at least this many timed iterations.");
ABSL_FLAG(std::string, warmup_max, "16M",
          "Payloads up to this size get one untimed iteration on every stream "
          "first; larger ones warm up the first stream only.");
ABSL_FLAG(int, rounds, 1,
          "TCP/gRPC measurement pairs per point; the best of each is shown.");
ABSL_FLAG(std::string, modes, "tcp,grpc",
          "Which transports to measure: tcp, grpc (both for a ratio).");
namespace asgd::bench {
namespace {

constexpr double kGB = 1e9;

// ESTABLISHED TCP sockets whose local port is `port` (the server ends of the
// connections to a listener on `port`), from /proc/net/tcp{,6}.
int CountEstablished(int port) {
  int count = 0;
  for (const char* path : {"/proc/net/tcp", "/proc/net/tcp6"}) {
    std::ifstream in(path);
    std::string line;
    std::getline(in, line);  // header
    while (std::getline(in, line)) {
      std::vector<absl::string_view> f =
          absl::StrSplit(line, ' ', absl::SkipEmpty());
      if (f.size() < 4 || f[3] != "01") continue;  // 01: ESTABLISHED
      const size_t colon = f[1].rfind(':');
      int local = 0;
      if (colon != absl::string_view::npos &&
          absl::SimpleHexAtoi(f[1].substr(colon + 1), &local) &&
          local == port) {
        ++count;
      }
    }
  }
  return count;
}

// --- timing ------------------------------------------------------------------

struct StreamStats {
  int64_t iters = 0;
  double push_s = 0;  // gRPC only: time inside Push
  double pull_s = 0;  // gRPC only: time inside Pull
  absl::Status status;
};

struct Measurement {
  double wall_s = 0;
  double cpu_s = 0;  // process CPU seconds during the measurement
  int64_t iters = 0;
  double push_s = 0;
  double pull_s = 0;
};

// Runs `op(stream, stats)` on `streams` threads started together until
// min_time has passed and each did min_iters iterations.
template <typename Op>
absl::StatusOr<Measurement> RunStreams(int streams, double min_time,
                                       int min_iters, Op op) {
  StartGate gate(streams);
  std::vector<StreamStats> stats(streams);
  std::vector<Clock::time_point> starts(streams), ends(streams);
  std::vector<std::thread> threads;
  const double cpu0 = ProcessCpuSeconds();
  for (int s = 0; s < streams; ++s) {
    threads.emplace_back([&, s] {
      const Clock::time_point t0 = gate.Arrive();
      starts[s] = t0;
      while (stats[s].iters < min_iters ||
             SecondsBetween(t0, Clock::now()) < min_time) {
        absl::Status st = op(s, &stats[s]);
        if (!st.ok()) {
          stats[s].status = st;
          break;
        }
        ++stats[s].iters;
      }
      ends[s] = Clock::now();
    });
  }
  for (std::thread& t : threads) t.join();
  Measurement m;
  m.cpu_s = ProcessCpuSeconds() - cpu0;
  for (int s = 0; s < streams; ++s) {
    if (!stats[s].status.ok()) return stats[s].status;
    m.iters += stats[s].iters;
    m.push_s += stats[s].push_s;
    m.pull_s += stats[s].pull_s;
  }
  m.wall_s =
      SecondsBetween(starts[0], *std::max_element(ends.begin(), ends.end()));
  return m;
}

struct Row {
  int64_t payload = 0;
  int streams = 0;
  int64_t chunk = 0;
  WireDtype dtype = WireDtype::kFloat32;
  bool persistent = true;  // long-lived streams (else one call each)
  double us_per_iter = 0;  // mean push+pull of one stream, microseconds
  double tcp_gbps = 0;
  double grpc_gbps = 0;
  double push_gbps = 0;
  double pull_gbps = 0;
  double tcp_cores = 0;   // process CPU / wall during the TCP measurement
  double grpc_cores = 0;  // same for gRPC
  int connections = 0;
  int64_t tcp_iters = 0;
  int64_t grpc_iters = 0;
};

int Fail(const absl::Status& status) {
  std::fprintf(stderr, "transport_bench: %s\n", status.ToString().c_str());
  return 1;
}

int Run() {
  auto payloads = ParseByteList("payloads", absl::GetFlag(FLAGS_payloads));
  if (!payloads.ok()) return Fail(payloads.status());
  auto streams = ParseCountList("streams", absl::GetFlag(FLAGS_streams));
  if (!streams.ok()) return Fail(streams.status());
  auto chunks =
      ParseCountList("chunk_elements", absl::GetFlag(FLAGS_chunk_elements));
  if (!chunks.ok()) return Fail(chunks.status());
  std::vector<WireDtype> dtypes;
  for (absl::string_view d : absl::StrSplit(absl::GetFlag(FLAGS_wire_dtypes),
                                            ',', absl::SkipEmpty())) {
    auto dtype = ParseWireDtype(d);
    if (!dtype.ok()) return Fail(dtype.status());
    dtypes.push_back(*dtype);
  }
  if (dtypes.empty()) {
    return Fail(absl::InvalidArgumentError("--wire_dtypes is empty"));
  }
  auto warmup_max =
      ParseByteList("warmup_max", absl::GetFlag(FLAGS_warmup_max));
  if (!warmup_max.ok()) return Fail(warmup_max.status());
  const double min_time = absl::GetFlag(FLAGS_min_time_s);
  const int min_iters = absl::GetFlag(FLAGS_min_iters);
  const int rounds = absl::GetFlag(FLAGS_rounds);
  const int shards = absl::GetFlag(FLAGS_shards);
  if (min_time < 0 || min_iters < 1 || rounds < 1 || shards < 1) {
    return Fail(absl::InvalidArgumentError(
        "--min_time_s must be >= 0, --min_iters, --rounds, --shards >= 1"));
  }
  // The gRPC client's one transport: a long-lived PushStream and PullStream
  // per client (the per-call Push and Pull are retired).
  const std::vector<bool> transports = {true};
  bool do_tcp = false, do_grpc = false;
  for (absl::string_view m :
       absl::StrSplit(absl::GetFlag(FLAGS_modes), ',', absl::SkipEmpty())) {
    if (m == "tcp") {
      do_tcp = true;
    } else if (m == "grpc") {
      do_grpc = true;
    } else {
      return Fail(absl::InvalidArgumentError(
          absl::StrCat("--modes: unknown transport '", m, "' (tcp, grpc)")));
    }
  }
  for (int c : *chunks) {
    if (c > 786432) {
      return Fail(absl::InvalidArgumentError(
          "--chunk_elements above 786432 (3 MiB) is refused by the client"));
    }
  }
  const int max_streams = *std::max_element(streams->begin(), streams->end());

  PrintMachine("transport_bench");
  std::printf(
      "# push+pull over loopback: gRPC (GrpcServer with %d shard(s), plain "
      "SGD; GrpcParamClient per stream) vs raw TCP (one connection per "
      "stream, echo of the same bytes)\n"
      "# GB/s = 2 x payload x iterations / wall / 1e9; best of %d round(s); "
      "min %.2f s and %d iteration(s) per stream per measurement\n",
      shards, rounds, min_time, min_iters);
  std::printf(
      "\n| payload | streams | chunk floats | wire | gRPC transport | raw TCP "
      "GB/s | gRPC push+pull GB/s | gRPC / TCP | gRPC push GB/s | gRPC pull "
      "GB/s | µs per push+pull | gRPC TCP conns | cores busy TCP / gRPC |\n"
      "|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
  std::fflush(stdout);

  std::vector<Row> rows;
  for (WireDtype dtype : dtypes) {
  for (int64_t chunk : *chunks) {
    for (int64_t payload_req : *payloads) {
      const int64_t n = std::max<int64_t>(payload_req / 4, 2);
      const int64_t payload = n * 4;
      const bool warm_all = payload <= (*warmup_max)[0];

      // Buffers shared by both transports: what the client sends (the
      // gradient), what it receives into (the pulled model), per stream.
      std::vector<float> gradient(n, 1e-6f);
      std::vector<std::vector<float>> params(max_streams);
      for (auto& p : params) p.assign(n, 0.0f);

      std::unique_ptr<GrpcServer> server;
      // Per transport, one client per stream.
      std::vector<std::vector<std::unique_ptr<GrpcParamClient>>> clients(
          transports.size());
      std::vector<std::vector<uint64_t>> versions(max_streams);
      if (do_grpc) {
        // A model of n floats: a softmax layer of `classes` outputs over
        // n / classes - 1 inputs (n is a multiple of 1024, or small).
        ParamStoreOptions options;
        ModelSpec spec;
        spec.num_classes = static_cast<int>(std::min<int64_t>(1024, n / 2));
        spec.feature_dim = static_cast<int>(n / spec.num_classes - 1);
        spec.context = 0;
        if (ModelParamCount(spec) != n) {
          return Fail(absl::InvalidArgumentError(absl::StrCat(
              n, " floats is not a multiple of ", spec.num_classes)));
        }
        SetModel(spec, &options);
        options.num_shards = shards;
        options.optimizer.learning_rate = 0.01f;
        options.max_chunk_elements = chunk;
        options.queue_capacity = std::max(32, 2 * max_streams);
        std::vector<float> initial(n, 0.01f);
        auto started = GrpcServer::Start(options, initial, "127.0.0.1", 0);
        if (!started.ok()) return Fail(started.status());
        server = std::move(*started);
        for (size_t t = 0; t < transports.size(); ++t) {
          for (int s = 0; s < max_streams; ++s) {
            PoolClientOptions copts;
            copts.worker_id = s;
            copts.connect_timeout = absl::Seconds(10);
            copts.rpc_timeout = absl::Seconds(600);
            copts.wire_dtype = dtype;
            auto client =
                GrpcParamClient::Create({server->local_address()}, copts);
            if (!client.ok()) return Fail(client.status());
            clients[t].push_back(std::move(*client));
          }
          // Untimed: a first pull (versions), and one push+pull per stream.
          std::vector<std::thread> warm;
          absl::Mutex warm_mu;
          absl::Status warm_status;
          for (int s = 0; s < max_streams; ++s) {
            warm.emplace_back([&, s, t] {
              GrpcParamClient* c = clients[t][s].get();
              absl::Status st = c->Pull(absl::MakeSpan(params[s]), &versions[s]);
              if (st.ok() && (warm_all || s == 0)) {
                auto pushed = c->Push(gradient, versions[s], 1);
                st = pushed.status();
                if (st.ok()) {
                  st = c->Pull(absl::MakeSpan(params[s]), &versions[s]);
                }
              }
              absl::MutexLock lock(&warm_mu);
              if (warm_status.ok()) warm_status = st;
            });
          }
          for (std::thread& th : warm) th.join();
          if (!warm_status.ok()) return Fail(warm_status);
        }
      }

      for (int S : *streams) {
        // One row per gRPC transport; raw TCP is measured once per round and
        // shared by them.
        std::vector<Row> point(transports.size());
        for (size_t t = 0; t < transports.size(); ++t) {
          point[t].payload = payload;
          point[t].streams = S;
          point[t].chunk = chunk;
          point[t].dtype = dtype;
          point[t].persistent = transports[t];
        }
        double tcp_gbps = 0, tcp_cores = 0;
        int64_t tcp_iters = 0;
        for (int round = 0; round < rounds; ++round) {
          if (do_tcp) {
            std::vector<std::vector<float>> server_recv(S);
            std::vector<char*> crecv, srecv;
            for (int s = 0; s < S; ++s) {
              server_recv[s].assign(n, 0.0f);
              crecv.push_back(reinterpret_cast<char*>(params[s].data()));
              srecv.push_back(reinterpret_cast<char*>(server_recv[s].data()));
            }
            // The server side sends the "model": any P bytes.
            auto tcp = TcpLoopback::Start(
                S, payload, reinterpret_cast<const char*>(gradient.data()),
                reinterpret_cast<const char*>(gradient.data()), crecv, srecv);
            if (!tcp.ok()) return Fail(tcp.status());
            for (int s = 0; s < S && (warm_all || s == 0); ++s) {
              if (absl::Status st = (*tcp)->RoundTrip(s); !st.ok()) {
                return Fail(st);
              }
            }
            auto m = RunStreams(
                S, min_time, min_iters,
                [&](int s, StreamStats*) { return (*tcp)->RoundTrip(s); });
            if (!m.ok()) return Fail(m.status());
            const double gbps = 2.0 * payload * m->iters / m->wall_s / kGB;
            if (gbps > tcp_gbps) {
              tcp_gbps = gbps;
              tcp_iters = m->iters;
              tcp_cores = m->cpu_s / m->wall_s;
            }
          }
          for (size_t t = 0; do_grpc && t < transports.size(); ++t) {
            Row& row = point[t];
            auto m =
                RunStreams(S, min_time, min_iters, [&](int s, StreamStats* st) {
                  GrpcParamClient* c = clients[t][s].get();
                  const Clock::time_point t0 = Clock::now();
                  auto pushed = c->Push(gradient, versions[s], 1);
                  if (!pushed.ok()) return pushed.status();
                  if (pushed->applied != 1) {
                    return absl::InternalError("push was not applied");
                  }
                  const Clock::time_point t1 = Clock::now();
                  absl::Status pulled =
                      c->Pull(absl::MakeSpan(params[s]), &versions[s]);
                  st->push_s += SecondsBetween(t0, t1);
                  st->pull_s += SecondsBetween(t1, Clock::now());
                  return pulled;
                });
            if (!m.ok()) return Fail(m.status());
            const double gbps = 2.0 * payload * m->iters / m->wall_s / kGB;
            if (gbps > row.grpc_gbps) {
              row.grpc_gbps = gbps;
              row.grpc_iters = m->iters;
              row.grpc_cores = m->cpu_s / m->wall_s;
              // S streams, each moving P bytes per call of mean duration t.
              row.push_gbps = S * payload / (m->push_s / m->iters) / kGB;
              row.pull_gbps = S * payload / (m->pull_s / m->iters) / kGB;
              row.us_per_iter = 1e6 * (m->push_s + m->pull_s) / m->iters;
            }
            row.connections = CountEstablished(server->port());
          }
        }
        for (Row& row : point) {
          row.tcp_gbps = tcp_gbps;
          row.tcp_iters = tcp_iters;
          row.tcp_cores = tcp_cores;
          const double ratio =
              row.tcp_gbps > 0 ? row.grpc_gbps / row.tcp_gbps : 0.0;
          std::printf(
              "| %s | %d | %lld | %s | %s | %.3f | %.3f | %.2f | %.3f | %.3f | "
              "%.0f | %d | %.2f / %.2f |\n",
              FormatBytes(payload).c_str(), S, static_cast<long long>(chunk),
              std::string(WireDtypeName(dtype)).c_str(),
              row.persistent ? "stream" : "calls", row.tcp_gbps, row.grpc_gbps,
              ratio, row.push_gbps, row.pull_gbps, row.us_per_iter,
              row.connections, row.tcp_cores, row.grpc_cores);
          std::fflush(stdout);
          rows.push_back(row);
        }
      }
      clients.clear();
      if (server) server->Shutdown(absl::Seconds(1));
    }
  }
  }

  std::printf(
      "\n# csv,transport,payload_bytes,streams,chunk_elements,tcp_gbps,"
      "grpc_gbps,grpc_over_tcp,push_gbps,pull_gbps,grpc_connections,"
      "tcp_iters,grpc_iters,tcp_cores,grpc_cores,wire_bytes_per_param,"
      "persistent_streams,us_per_push_pull\n");
  int met = 0, counted = 0;
  double worst = 1e9;
  for (const Row& r : rows) {
    const double ratio = r.tcp_gbps > 0 ? r.grpc_gbps / r.tcp_gbps : 0.0;
    std::printf(
        "csv,transport,%lld,%d,%lld,%.4f,%.4f,%.4f,%.4f,%.4f,%d,%lld,%lld,"
        "%.3f,%.3f,%d,%d,%.1f\n",
        static_cast<long long>(r.payload), r.streams,
        static_cast<long long>(r.chunk), r.tcp_gbps, r.grpc_gbps, ratio,
        r.push_gbps, r.pull_gbps, r.connections,
        static_cast<long long>(r.tcp_iters),
        static_cast<long long>(r.grpc_iters), r.tcp_cores, r.grpc_cores,
        WireBytes(r.dtype), r.persistent ? 1 : 0, r.us_per_iter);
    if (do_tcp && do_grpc && r.payload >= (int64_t{1} << 20) &&
        r.dtype == WireDtype::kFloat32) {
      ++counted;
      met += ratio >= 0.9;
      worst = std::min(worst, ratio);
    }
  }
  if (counted > 0) {
    std::printf(
        "# target gRPC/TCP >= 0.9 at payloads >= 1M (fp32 on the wire): met at "
        "%d of %d points "
        "(lowest ratio %.2f); reported, not enforced\n",
        met, counted, worst);
  }
  std::printf("# transport_bench: load average at end: %s\n",
              LoadAverage().c_str());
  return 0;
}

}  // namespace
}  // namespace asgd::bench

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "Push+pull throughput of asgd's gRPC transport vs raw TCP over "
      "loopback. The gRPC client is the worker's: one long-lived PushStream "
      "and PullStream per client, the only transport (per-call Push and "
      "Pull are retired, so there is no calls-vs-streams comparison any "
      "more).\nExample: transport_bench --payloads=1M,16M --streams=1,4");
  absl::ParseCommandLine(argc, argv);
  return asgd::bench::Run();
}
