// replay_bench: what a delta pull's update costs the worker, per server
// slice of the seed DNN, on the host replay path and on the device path of
// --replay_on_device, in one run:
//
//   parse        ParseCompressedChunk of every chunk (both paths)
//   host xN      ApplyCompressedRange over the slice in N parts, one
//                thread each (the worker's replay, --replay_threads=N)
//   host x1 pruned  the same on one thread under a pruned model's mask
//                (--pruned of the weights at random): a delta pull's
//                replay on a pruned pool
//   plan         ReplayPlanBuilder over the parsed chunks: the host's share
//                of the device path
//   host pass    the device pass run on the CPU (CreateHostReplayCopy):
//                the CPU reference, not a path a worker takes
// and, with --backend=cuda on a GPU:
//   device       ExactCopy::Replay on the backend's copy: plan upload and
//                the replay kernel, until the copy is updated
//   device pruned  the same on a copy uploaded with the pruned model's mask
//   mirror       MirrorFromCopy: the slice device to device into the
//                mirror (what each mirrored pull costs)
//   download mirror  DownloadMirror of that slice into a pinned model
//                buffer (only when the host reads the model: an
//                evaluation)
//   load mirror  LoadMirroredModel of the whole model (device to device)
//   load host    LoadModel of the whole model from a pinned buffer
//
// Updates are 1-bit (groups of --group elements) or top-k (--top_k of each
// chunk) chunks of --chunk_elements, as a server's update log keeps them.
// Each row is the best of --rounds rounds of at least --min_seconds, after
// one untimed pass; ms per update of one slice, and the ratio to the host
// replay on one thread. Before timing, each path replays the update once on
// the same weights (and, with --pruned, once more under the mask on the
// pruned weights), and a "# check" line says whether every path left the
// host replay's bits (the bench exits 1 when one did not).
//
//   bazel run -c opt //bench:replay_bench
//   replay_bench --backend=cuda --threads=1,4 --encodings=onebit,topk
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "bench/bench_util.h"
#include "compression/grad_codec.h"
#include "model/backend.h"
#include "model/backend_factory.h"
#include "model/cuda/host_replay_copy.h"
#include "model/model_spec.h"
#include "step/compressed_apply.h"
#include "step/optimizer.h"
#include "step/replay_plan.h"
#include "worker/ps/part_runner.h"

ABSL_FLAG(std::string, hidden, "2048,2048,2048,2048,2048",
          "Hidden layer widths of the DNN (the seed DNN by default).");
ABSL_FLAG(int, num_classes, 2000, "Output classes of the DNN.");
ABSL_FLAG(int, servers, 2, "Servers: the model is cut into this many slices.");
ABSL_FLAG(int64_t, chunk_elements, 256 * 1024, "Elements per update chunk.");
ABSL_FLAG(int64_t, group, 2048, "One-bit group size.");
ABSL_FLAG(double, top_k, 0.01, "Top-k: the share of a chunk's elements.");
ABSL_FLAG(std::string, encodings, "onebit,topk", "onebit, topk.");
ABSL_FLAG(std::string, threads, "1,4", "Host replay parts (threads).");
ABSL_FLAG(std::string, backend, "cpu",
          "cpu: the host rows only; cuda: also the device rows.");
ABSL_FLAG(int, rounds, 3, "Rounds per row (the best counts).");
ABSL_FLAG(double, min_seconds, 0.3, "Least time per round.");
ABSL_FLAG(double, pruned, 0.7,
          "Share of the weights a pruned model's mask holds at 0 in the "
          "'host x1 pruned' row; 0: no such row.");

namespace asgd::bench {
namespace {

struct Update {
  std::vector<std::string> bytes;
  std::vector<CompressedChunk> chunks;  // views of `bytes`
};

absl::StatusOr<Update> MakeUpdate(int64_t n, bool one_bit, std::mt19937* rng) {
  const int64_t chunk = absl::GetFlag(FLAGS_chunk_elements);
  std::normal_distribution<float> normal(0.0f, 1e-3f);
  Update u;
  for (int64_t begin = 0; begin < n; begin += chunk) {
    const int64_t count = std::min(chunk, n - begin);
    std::vector<float> g(count), residual(count, 0.0f);
    for (float& x : g) x = normal(*rng);
    std::string out;
    const absl::Status s =
        one_bit
            ? EncodeOneBit(g, absl::GetFlag(FLAGS_group),
                           std::min(absl::GetFlag(FLAGS_group), count),
                           absl::MakeSpan(residual), &out)
            : EncodeTopK(g,
                         std::max<int64_t>(
                             1, static_cast<int64_t>(
                                    count * absl::GetFlag(FLAGS_top_k))),
                         absl::MakeSpan(residual), &out);
    if (!s.ok()) return s;
    u.bytes.push_back(std::move(out));
  }
  CodecLimits limits;
  limits.max_elements = chunk;
  for (const std::string& b : u.bytes) {
    absl::StatusOr<CompressedChunk> c = ParseCompressedChunk(b, limits);
    if (!c.ok()) return c.status();
    u.chunks.push_back(*c);
  }
  return u;
}

Optimizer Sgd(float lr) {
  OptimizerOptions o;
  o.learning_rate = lr;
  return *Optimizer::Create(o);
}

// A table row and its csv line (the path's name with '_' for ' ').
void Row(const std::string& encoding, const std::string& path, double s,
         double host1) {
  std::printf("| %s | %s | %.3f | %.2f |\n", encoding.c_str(), path.c_str(),
              1e3 * s, host1 / s);
  std::string id = path;
  std::replace(id.begin(), id.end(), ' ', '_');
  std::printf("csv,replay,%s,%s,%.6f\n", encoding.c_str(), id.c_str(), s);
}

int Run() {
  PrintMachine("replay_bench");
  ModelSpec spec;
  spec.feature_dim = 40;
  spec.context = 5;
  spec.num_classes = absl::GetFlag(FLAGS_num_classes);
  for (absl::string_view w :
       absl::StrSplit(absl::GetFlag(FLAGS_hidden), ',')) {
    int width = 0;
    if (!absl::SimpleAtoi(w, &width) || width < 1) {
      std::fprintf(stderr, "bad --hidden entry '%s'\n", std::string(w).c_str());
      return 2;
    }
    spec.layers.push_back(LayerSpec::Dense(width, Activation::kRelu));
  }
  auto threads = ParseCountList("threads", absl::GetFlag(FLAGS_threads));
  if (!threads.ok()) {
    std::fprintf(stderr, "%s\n", threads.status().ToString().c_str());
    return 2;
  }
  const int servers = absl::GetFlag(FLAGS_servers);
  const int64_t params = ModelParamCount(spec);
  const double top_k = absl::GetFlag(FLAGS_top_k);
  if (servers < 1 || servers > params || absl::GetFlag(FLAGS_group) < 1 ||
      absl::GetFlag(FLAGS_chunk_elements) < 1 ||
      absl::GetFlag(FLAGS_chunk_elements) > kGradCodecMaxElements ||
      !(top_k > 0 && top_k <= 1) || absl::GetFlag(FLAGS_rounds) < 1 ||
      !(absl::GetFlag(FLAGS_pruned) >= 0 && absl::GetFlag(FLAGS_pruned) < 1)) {
    std::fprintf(stderr,
                 "want --servers in [1, %lld], --group >= 1, "
                 "--chunk_elements in [1, %lld], --top_k in (0, 1], "
                 "--rounds >= 1, --pruned in [0, 1)\n",
                 static_cast<long long>(params),
                 static_cast<long long>(kGradCodecMaxElements));
    return 2;
  }
  const int64_t n = params / servers;  // one slice (the first's size)
  const std::string backend = absl::GetFlag(FLAGS_backend);
  if (backend != "cpu" && backend != "cuda") {
    std::fprintf(stderr, "--backend=%s: want cpu or cuda\n", backend.c_str());
    return 2;
  }
  std::unique_ptr<ModelBackend> device;
  if (backend == "cuda") {
    std::string note;
    auto made = CreateBackend("cuda", spec, 256, &note);
    if (!made.ok()) {
      std::fprintf(stderr, "--backend=cuda: %s\n",
                   made.status().ToString().c_str());
      return 1;
    }
    device = *std::move(made);
  }
  std::printf("# %lld parameters, %d slices of %lld; chunks of %lld\n",
              static_cast<long long>(params), servers,
              static_cast<long long>(n),
              static_cast<long long>(absl::GetFlag(FLAGS_chunk_elements)));
  std::printf("| encoding | path | ms per update | x host, 1 thread |\n");
  std::printf("|---|---|---|---|\n");
  const int rounds = absl::GetFlag(FLAGS_rounds);
  const double min_s = absl::GetFlag(FLAGS_min_seconds);
  std::mt19937 rng(7);
  std::vector<float> w(n);
  for (float& x : w) x = std::normal_distribution<float>(0.0f, 0.05f)(rng);
  const Optimizer step = Sgd(1e-4f);
  for (absl::string_view e :
       absl::StrSplit(absl::GetFlag(FLAGS_encodings), ',')) {
    const std::string encoding(e);
    if (encoding != "onebit" && encoding != "topk") {
      std::fprintf(stderr, "unknown encoding '%s'\n", encoding.c_str());
      return 2;
    }
    absl::StatusOr<Update> u = MakeUpdate(n, encoding == "onebit", &rng);
    if (!u.ok()) {
      std::fprintf(stderr, "%s\n", u.status().ToString().c_str());
      return 1;
    }
    std::unique_ptr<ExactCopy> host_copy = *CreateHostReplayCopy(n);
    std::unique_ptr<ExactCopy> device_copy;
    if (device != nullptr) {
      auto made = device->CreateExactCopy(n);
      if (!made.ok()) {
        std::fprintf(stderr, "device copy: %s\n",
                     made.status().ToString().c_str());
        return 1;
      }
      device_copy = *std::move(made);
    }
    // A pruned model's mask (empty: no pruned rows), its weights 0.
    std::vector<uint8_t> keep;
    std::vector<float> pruned_w;
    if (const double pruned = absl::GetFlag(FLAGS_pruned); pruned > 0) {
      std::uniform_real_distribution<double> uniform(0.0, 1.0);
      keep.resize(n);
      for (uint8_t& k : keep) k = uniform(rng) >= pruned;
      pruned_w = w;
      for (int64_t i = 0; i < n; ++i) {
        if (keep[i] == 0) pruned_w[i] = 0.0f;
      }
    }
    {  // every path once on the same weights: the same bits?
      ReplayPlanBuilder builder;
      for (const CompressedChunk& c : u->chunks) builder.Add(c);
      const ReplayPlan once = builder.Take();
      bool same = true;
      for (const bool masked : {false, true}) {
        if (masked && keep.empty()) continue;
        const std::vector<float>& from = masked ? pruned_w : w;
        UpdateContext ctx;
        if (masked) ctx.keep = keep.data();
        std::vector<float> want = from, got(n);
        ApplyCompressedRange(step, u->chunks, 0, n, want.data(), nullptr, ctx);
        for (ExactCopy* c : {host_copy.get(), device_copy.get()}) {
          if (c == nullptr) continue;
          same = same &&
                 c->Upload(from, masked ? keep : std::vector<uint8_t>()).ok() &&
                 c->Replay(once, 1e-4f, 0.0f).ok() &&
                 c->Download(absl::MakeSpan(got)).ok() &&
                 std::memcmp(got.data(), want.data(), n * sizeof(float)) == 0;
        }
      }
      std::printf("# check (%s): %s the host replay's bits: %s\n",
                  encoding.c_str(),
                  device_copy ? "the host pass and the device leave"
                              : "the host pass leaves",
                  same ? "yes" : "NO");
      if (!same) return 1;
    }
    CodecLimits limits;
    limits.max_elements = absl::GetFlag(FLAGS_chunk_elements);
    const double parse = BestSecondsPerPass(
        [&] {
          for (const std::string& b : u->bytes) {
            (void)ParseCompressedChunk(b, limits);
          }
        },
        rounds, min_s);
    const double host1 = BestSecondsPerPass(
        [&] {
          ApplyCompressedRange(step, u->chunks, 0, n, w.data(), nullptr,
                               UpdateContext{});
        },
        rounds, min_s);
    Row(encoding, "parse", parse, host1);
    Row(encoding, "host x1", host1, host1);
    if (!keep.empty()) {
      UpdateContext masked;
      masked.keep = keep.data();
      const double s = BestSecondsPerPass(
          [&] {
            ApplyCompressedRange(step, u->chunks, 0, n, w.data(), nullptr,
                                 masked);
          },
          rounds, min_s);
      Row(encoding, "host x1 pruned", s, host1);
    }
    for (int t : *threads) {
      if (t == 1) continue;
      PartRunner runner(t);
      const double s = BestSecondsPerPass(
          [&] {
            runner.Run([&](int part) {
              int64_t b, end;
              PartRunner::Split(n, t, part, &b, &end);
              ApplyCompressedRange(step, u->chunks, b, end, w.data() + b,
                                   nullptr, UpdateContext{});
            });
          },
          rounds, min_s);
      Row(encoding, absl::StrCat("host x", t), s, host1);
    }
    ReplayPlan plan;
    const double build = BestSecondsPerPass(
        [&] {
          ReplayPlanBuilder builder;
          for (const CompressedChunk& c : u->chunks) builder.Add(c);
          plan = builder.Take();
        },
        rounds, min_s);
    std::printf("# %s: a plan of %lld KiB per update\n", encoding.c_str(),
                static_cast<long long>(plan.bytes() / 1024));
    Row(encoding, "plan", build, host1);
    (void)host_copy->Upload(w);
    Row(encoding, "host pass",
        BestSecondsPerPass([&] { (void)host_copy->Replay(plan, 1e-4f, 0.0f); },
                           rounds, min_s),
        host1);
    if (device == nullptr) continue;
    ExactCopy* const copy = device_copy.get();
    absl::Status failed = copy->Upload(w);
    // A device row: `call` timed; an error it returns is kept in `failed`.
    auto device_row = [&](const char* path, auto call) {
      Row(encoding, path,
          BestSecondsPerPass(
              [&] {
                absl::Status s = call();
                if (!s.ok()) failed = s;
              },
              rounds, min_s),
          host1);
    };
    device_row("device", [&] { return copy->Replay(plan, 1e-4f, 0.0f); });
    if (!keep.empty()) {
      if (absl::Status s = copy->Upload(pruned_w, keep); !s.ok()) failed = s;
      device_row("device pruned",
                 [&] { return copy->Replay(plan, 1e-4f, 0.0f); });
    }
    std::vector<float> model(params, 0.0f);
    (void)device->PinHostBuffer(model);
    device_row("mirror", [&] {
      return device->MirrorFromCopy(absl::MakeSpan(model), 0, *copy);
    });
    device_row("download mirror", [&] {
      return device->DownloadMirror(absl::MakeSpan(model), 0, copy->size());
    });
    device_row("load mirror", [&] { return device->LoadMirroredModel(model); });
    device_row("load host", [&] { return device->LoadModel(model); });
    device->UnpinHostBuffer(model);
    if (!failed.ok()) {
      std::fprintf(stderr, "device rows failed: %s\n",
                   failed.ToString().c_str());
      return 1;
    }
  }
  std::printf("# load at end: %s\n", LoadAverage().c_str());
  return 0;
}

}  // namespace
}  // namespace asgd::bench

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "What a delta pull's update costs a worker: host replay against the "
      "device path (--replay_on_device).\nExample: replay_bench "
      "--backend=cuda --threads=1,4");
  absl::ParseCommandLine(argc, argv);
  return asgd::bench::Run();
}
