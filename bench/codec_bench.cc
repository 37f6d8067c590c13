// codec_bench: gradient encodings for the seed's DNN (440 inputs, 5 hidden
// layers of 2048, 2000 outputs: 21.8 M parameters, 87 MB of float32), as one
// server's range cut into wire chunks:
//
//  1. wire bytes per push for each encoding (fp32, bf16, 1-bit, top-k at
//     several fractions);
//  2. the worker's encode cost per push (one thread);
//  3. the server's decode + apply rate in bytes touched per second against
//     memcpy bandwidth measured in the same run, with 1..cores threads on
//     disjoint slices (as shards);
//  4. the server's CPU time per push (validation + decode + apply, transport
//     excluded) for each encoding, and pushes/s relative to float32.
//
//   bazel run -c opt //bench:codec_bench
//   codec_bench --threads=1,2 --reps=4 --rounds=2
//   codec_bench --params=67108864   # one [params/2048, 2048] tensor instead
//
// Byte conventions (bytes the algorithm reads plus bytes it writes; cache-line
// write-allocate traffic is not counted, for any kernel):
//   memcpy of B bytes:   2 B
//   fp32 apply:          12 B/param SGD (read g, read+write w), 20 B momentum
//                        (and read+write v): Optimizer::Apply on a float
//                        gradient, the apply of today's server
//   fp32 decode+apply:   + 4 + 4 B/param: the receive path's decode of the
//                        wire bytes into the staging buffer (DecodeFloats with
//                        the NaN/Inf check), then the apply
//   bf16 decode+apply:   + 2 + 4 B/param
//   1-bit, top-k fused:  the encoded bytes of the push, plus w read+written
//                        (8 B/param) and with momentum v (8 B/param); top-k
//                        with plain SGD reads and writes only the k selected
//                        weights (8 B each)
// ratio = bytes/s / memcpy bytes/s with the same number of threads.
//
// Each row is the best of --rounds; the apply rows rotate over two different
// pushes. Output: markdown tables, `csv,codec_*,...` lines, and the summary
// against the targets (decode+apply >= 0.7 of memcpy; 1-bit pushes/s >= 5x
// float32 end to end, of which only the server's CPU share is measured here),
// reported, never enforced.
#include <algorithm>
#include <cmath>
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
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "bench/bench_util.h"
#include "common/chunking.h"
#include "model/model_spec.h"
#include "common/model_layout.h"
#include "common/wire_codec.h"
#include "compression/grad_codec.h"
#include "compression/grad_encoder.h"
#include "step/compressed_apply.h"
#include "step/optimizer.h"

ABSL_FLAG(int, input_dim, 440, "Model inputs.");
ABSL_FLAG(std::string, hidden, "2048,2048,2048,2048,2048",
          "Hidden layer widths.");
ABSL_FLAG(int, num_classes, 2000, "Model outputs.");
ABSL_FLAG(int64_t, params, 0,
          "If > 0: one [params/2048, 2048] tensor instead of the DNN.");
ABSL_FLAG(std::string, encodings,
          "fp32,bf16,onebit,topk:0.001,topk:0.01,topk:0.1",
          "Encodings: fp32, bf16, onebit, topk:FRACTION.");
ABSL_FLAG(std::string, optimizers, "sgd,momentum",
          "Server optimizers for the apply rows: sgd, momentum.");
ABSL_FLAG(std::string, threads, "",
          "Comma-separated thread counts for the apply rows (default "
          "1..cores).");
ABSL_FLAG(int64_t, chunk_elements, asgd::kDefaultMaxChunkElements,
          "Elements per wire chunk.");
ABSL_FLAG(int, reps, 4, "Pushes per apply / encode measurement.");
ABSL_FLAG(int, rounds, 2, "Measurements per row; the best is shown.");

namespace asgd::bench {
namespace {

constexpr double kGB = 1e9;

int Fail(const absl::Status& status) {
  std::fprintf(stderr, "codec_bench: %s\n", status.ToString().c_str());
  return 1;
}

enum class Kind { kFp32, kBf16, kOneBit, kTopK };

struct Encoding {
  std::string name;
  Kind kind = Kind::kFp32;
  double fraction = 0;  // top-k
};

absl::StatusOr<std::vector<Encoding>> ParseEncodings(absl::string_view text) {
  std::vector<Encoding> out;
  for (absl::string_view e : absl::StrSplit(text, ',', absl::SkipEmpty())) {
    Encoding enc{std::string(e)};
    if (e == "fp32") {
      enc.kind = Kind::kFp32;
    } else if (e == "bf16") {
      enc.kind = Kind::kBf16;
    } else if (e == "onebit") {
      enc.kind = Kind::kOneBit;
    } else if (absl::StartsWith(e, "topk:") &&
               absl::SimpleAtod(e.substr(5), &enc.fraction) &&
               enc.fraction > 0 && enc.fraction <= 1) {
      enc.kind = Kind::kTopK;
    } else {
      return absl::InvalidArgumentError(absl::StrCat(
          "--encodings: unknown '", e,
          "' (fp32, bf16, onebit, topk:FRACTION with 0 < FRACTION <= 1)"));
    }
    out.push_back(enc);
  }
  if (out.empty()) return absl::InvalidArgumentError("--encodings is empty");
  return out;
}

// One push of the whole range in one encoding.
struct Push {
  std::vector<char> dense;               // fp32 / bf16 wire bytes
  std::vector<std::string> chunk_bytes;  // compressed chunks
  std::vector<CompressedChunk> chunks;   // parsed views of chunk_bytes
  int64_t wire_bytes = 0;
  int64_t num_chunks = 0;
  int64_t selected = 0;  // top-k: entries in all chunks
};

// A gradient with row scales spread over two orders of magnitude, as the
// layers and units of a DNN have.
std::vector<float> MakeGradient(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal;
  std::uniform_real_distribution<float> log_scale(-2.0f, 0.0f);
  std::vector<float> g(n);
  float scale = 1;
  for (int64_t i = 0; i < n; ++i) {
    if (i % 2048 == 0) scale = 1e-3f * std::pow(10.0f, log_scale(rng));
    g[i] = scale * normal(rng);
  }
  return g;
}

class Bench {
 public:
  Bench(ModelLayout layout, int64_t chunk_elements)
      : layout_(std::move(layout)),
        range_(layout_.ServerRange(0)),
        plan_(PlanChunks(layout_, range_, chunk_elements)) {}

  int64_t n() const { return range_.size(); }

  absl::StatusOr<Push> Encode(const Encoding& e,
                              const std::vector<float>& grad) const {
    Push push;
    push.num_chunks = plan_.size();
    if (e.kind == Kind::kFp32 || e.kind == Kind::kBf16) {
      const WireDtype dtype =
          e.kind == Kind::kFp32 ? WireDtype::kFloat32 : WireDtype::kBfloat16;
      push.dense.resize(n() * WireBytes(dtype));
      EncodeFloats(grad.data(), n(), dtype, push.dense.data());
      push.wire_bytes = push.dense.size();
      return push;
    }
    auto encoder = MakeEncoder(e);
    if (!encoder.ok()) return encoder.status();
    push.chunk_bytes.resize(plan_.size());
    for (size_t c = 0; c < plan_.size(); ++c) {
      absl::Status s = encoder->EncodeChunk(
          plan_[c], grad.data() + (plan_[c].flat_begin - range_.begin),
          &push.chunk_bytes[c]);
      if (!s.ok()) return s;
      push.wire_bytes += push.chunk_bytes[c].size();
    }
    for (const std::string& bytes : push.chunk_bytes) {
      CodecLimits limits;
      limits.max_elements = kGradCodecMaxElements;
      auto chunk = ParseCompressedChunk(bytes, limits);
      if (!chunk.ok()) return chunk.status();
      push.chunks.push_back(*chunk);
      push.selected += chunk->k;
    }
    return push;
  }

  // Seconds for the worker to encode one push (one thread), best of rounds.
  absl::StatusOr<double> EncodeSeconds(const Encoding& e,
                                       const std::vector<float>& grad, int reps,
                                       int rounds) const {
    std::vector<char> dense(n() * 4);
    std::vector<std::string> out(plan_.size());
    auto encoder = MakeEncoder(e);
    double best = 1e30;
    for (int r = 0; r < rounds; ++r) {
      const Clock::time_point t0 = Clock::now();
      for (int k = 0; k < reps; ++k) {
        if (e.kind == Kind::kFp32 || e.kind == Kind::kBf16) {
          EncodeFloats(grad.data(), n(),
                       e.kind == Kind::kFp32 ? WireDtype::kFloat32
                                             : WireDtype::kBfloat16,
                       dense.data());
          continue;
        }
        if (!encoder.ok()) return encoder.status();
        for (size_t c = 0; c < plan_.size(); ++c) {
          absl::Status s = encoder->EncodeChunk(
              plan_[c], grad.data() + (plan_[c].flat_begin - range_.begin),
              &out[c]);
          if (!s.ok()) return s;
        }
      }
      best = std::min(best, SecondsBetween(t0, Clock::now()) / reps);
    }
    return best;
  }

  // Seconds for the server to validate one compressed push (all chunks, one
  // thread); 0 for fp32/bf16, whose check is part of the decode.
  static double ParseSeconds(const Push& push, int reps) {
    if (push.chunk_bytes.empty()) return 0;
    CodecLimits limits;
    limits.max_elements = kGradCodecMaxElements;
    const Clock::time_point t0 = Clock::now();
    int64_t ok = 0;
    for (int r = 0; r < reps; ++r) {
      for (const std::string& bytes : push.chunk_bytes) {
        ok += ParseCompressedChunk(bytes, limits).ok();
      }
    }
    const double s = SecondsBetween(t0, Clock::now()) / reps;
    return ok > 0 ? s : 0;
  }

  // Seconds per push of decode + apply with `threads` threads on disjoint
  // slices (fp32_apply_only: Optimizer::Apply on a float gradient).
  double ApplySeconds(const Encoding& e, bool fp32_apply_only,
                      const Optimizer& opt, const std::vector<Push>& pushes,
                      const std::vector<std::vector<float>>& grads,
                      std::vector<float>& w, std::vector<float>& v,
                      std::vector<float>& staging, int threads,
                      int reps) const {
    const int64_t total = n();
    const double s = TimeThreads(threads, [&](int t) {
      const auto [b, end] = ThreadSlice(total, threads, t);
      float* wt = w.data() + b;
      float* vt = opt.has_state() ? v.data() + b : nullptr;
      for (int r = 0; r < reps; ++r) {
        const Push& push = pushes[r % pushes.size()];
        UpdateContext ctx;
        ctx.step = r;
        if (fp32_apply_only) {
          opt.Apply(wt, vt, grads[r % grads.size()].data() + b, end - b, ctx);
        } else if (e.kind == Kind::kFp32 || e.kind == Kind::kBf16) {
          const WireDtype dtype = e.kind == Kind::kFp32 ? WireDtype::kFloat32
                                                        : WireDtype::kBfloat16;
          DecodeFloats(push.dense.data() + b * WireBytes(dtype), end - b, dtype,
                       staging.data() + b, /*check_finite=*/true);
          opt.Apply(wt, vt, staging.data() + b, end - b, ctx);
        } else {
          ApplyCompressedRange(opt, push.chunks, b, end, wt, vt, ctx);
        }
      }
    });
    return s / reps;
  }

 private:
  absl::StatusOr<GradEncoder> MakeEncoder(const Encoding& e) const {
    GradEncoderOptions options;
    options.encoding =
        e.kind == Kind::kTopK ? GradEncoding::kTopK : GradEncoding::kOneBit;
    options.top_k_fraction = e.kind == Kind::kTopK ? e.fraction : 0.01;
    return GradEncoder::Create(layout_, range_, options);
  }

  const ModelLayout layout_;
  const FlatRange range_;
  const std::vector<ChunkRef> plan_;
};

// Bytes touched per push (the header's convention).
double BytesTouched(const Encoding& e, bool apply_only, bool momentum,
                    const Push& push, int64_t n) {
  const double state = momentum ? 8.0 : 0.0;
  if (apply_only) return n * (12.0 + state);
  switch (e.kind) {
    case Kind::kFp32:
      return n * (4.0 + 4.0 + 12.0 + state);
    case Kind::kBf16:
      return n * (2.0 + 4.0 + 12.0 + state);
    case Kind::kOneBit:
      return push.wire_bytes + n * (8.0 + state);
    case Kind::kTopK:
      return push.wire_bytes +
             (momentum ? n * (8.0 + state) : 8.0 * push.selected);
  }
  return 0;
}

struct ApplyRow {
  std::string optimizer, encoding, path;
  int threads = 0;
  double seconds = 0;  // per push
  double bytes_per_s = 0;
  double memcpy_bytes_per_s = 0;
};

int Run() {
  const int reps = absl::GetFlag(FLAGS_reps);
  const int rounds = absl::GetFlag(FLAGS_rounds);
  const int64_t chunk_elements = absl::GetFlag(FLAGS_chunk_elements);
  if (reps < 1 || rounds < 1 || chunk_elements < 1) {
    return Fail(absl::InvalidArgumentError(
        "--reps, --rounds and --chunk_elements must be >= 1"));
  }
  auto encodings = ParseEncodings(absl::GetFlag(FLAGS_encodings));
  if (!encodings.ok()) return Fail(encodings.status());
  std::string threads_text = absl::GetFlag(FLAGS_threads);
  if (threads_text.empty()) {
    for (int t = 1; t <= NumCores(); ++t) {
      absl::StrAppend(&threads_text, t > 1 ? "," : "", t);
    }
  }
  auto thread_counts = ParseCountList("threads", threads_text);
  if (!thread_counts.ok()) return Fail(thread_counts.status());
  std::vector<std::string> optimizers;
  for (absl::string_view o : absl::StrSplit(absl::GetFlag(FLAGS_optimizers),
                                            ',', absl::SkipEmpty())) {
    if (o != "sgd" && o != "momentum") {
      return Fail(absl::InvalidArgumentError(
          absl::StrCat("--optimizers: unknown '", o, "' (sgd, momentum)")));
    }
    optimizers.emplace_back(o);
  }
  if (optimizers.empty()) {
    return Fail(absl::InvalidArgumentError("--optimizers is empty"));
  }

  std::vector<TensorSpec> tensors;
  std::string model;
  if (const int64_t p = absl::GetFlag(FLAGS_params); p > 0) {
    if (p < 2048) {
      return Fail(absl::InvalidArgumentError("--params must be >= 2048"));
    }
    tensors = {{"w", {p / 2048, 2048}}};
    model = absl::StrCat("one [", p / 2048, ", 2048] tensor");
  } else {
    ModelSpec spec;  // one row of input_dim values
    spec.feature_dim = absl::GetFlag(FLAGS_input_dim);
    spec.context = 0;
    auto hidden = ParseLayerSizes(absl::GetFlag(FLAGS_hidden));
    if (!hidden.ok()) return Fail(hidden.status());
    for (int h : *hidden) {
      spec.layers.push_back(LayerSpec::Dense(h, Activation::kRelu));
    }
    spec.num_classes = absl::GetFlag(FLAGS_num_classes);
    if (absl::Status s = ValidateModelSpec(spec); !s.ok()) return Fail(s);
    tensors = ModelTensors(spec);
    model = absl::StrCat("DNN ", spec.input_dim(), "-",
                         absl::GetFlag(FLAGS_hidden), "-", spec.num_classes);
  }
  auto layout = ModelLayout::Create(tensors, 1, 1);
  if (!layout.ok()) return Fail(layout.status());
  const Bench bench(*std::move(layout), chunk_elements);
  const int64_t n = bench.n();

  PrintMachine("codec_bench");
  std::printf(
      "# model: %s, %lld parameters (%.1f MB of float32), one server, chunks "
      "of %lld elements; best of %d round(s), %d push(es) per measurement\n",
      model.c_str(), static_cast<long long>(n), n * 4 / 1e6,
      static_cast<long long>(chunk_elements), rounds, reps);
  std::printf(
      "# bytes counted as read + written: memcpy 2 B per byte copied; fp32 "
      "apply 12 B/param (SGD), 20 B/param (momentum); decode+apply adds the "
      "wire bytes read and 4 B/param of staging written; fused: the encoded "
      "bytes + 8 B/param (w) + 8 B/param (v, momentum only); top-k with SGD: "
      "the encoded bytes + 8 B per selected element\n");

  const std::vector<std::vector<float>> grads = {MakeGradient(n, 1),
                                                 MakeGradient(n, 2)};
  std::vector<std::vector<Push>> pushes;  // per encoding, one per gradient
  for (const Encoding& e : *encodings) {
    std::vector<Push> p;
    for (const auto& g : grads) {
      auto push = bench.Encode(e, g);
      if (!push.ok()) return Fail(push.status());
      p.push_back(*std::move(push));
    }
    pushes.push_back(std::move(p));
  }

  // 1 + 2: wire bytes and encode cost.
  std::printf(
      "\n## Wire bytes per push and the worker's encode cost (1 thread)\n\n"
      "| encoding | wire bytes per push | bits per parameter | vs fp32 | "
      "chunks | encode ms per push | encode GB/s of gradient |\n"
      "|---|---|---|---|---|---|---|\n");
  std::vector<std::string> csv;
  for (size_t k = 0; k < encodings->size(); ++k) {
    const Encoding& e = (*encodings)[k];
    const Push& push = pushes[k][0];
    auto seconds = bench.EncodeSeconds(e, grads[0], reps, rounds);
    if (!seconds.ok()) return Fail(seconds.status());
    const double bits = 8.0 * push.wire_bytes / n;
    std::printf("| %s | %lld | %.3f | %.4f | %lld | %.2f | %.2f |\n",
                e.name.c_str(), static_cast<long long>(push.wire_bytes), bits,
                push.wire_bytes / (4.0 * n),
                static_cast<long long>(push.num_chunks), *seconds * 1e3,
                4.0 * n / *seconds / kGB);
    csv.push_back(absl::StrCat("csv,codec_wire,", e.name, ",", push.wire_bytes,
                               ",", bits, ",", push.num_chunks, ",", *seconds));
  }
  std::fflush(stdout);

  // 3: decode + apply vs memcpy.
  std::vector<float> w(n), v(n), staging(n), src(n), dst(n);
  Fill(w.data(), n, 0.01f);
  Fill(v.data(), n, 0.0f);
  Fill(staging.data(), n, 0.0f);
  Fill(src.data(), n, 1.0f);
  Fill(dst.data(), n, 0.0f);
  MemcpyRate(src, dst, 1, 1);  // warm-up
  std::printf(
      "\n## Decode + apply vs memcpy (bytes read + written per second)\n\n"
      "| optimizer | encoding | path | threads | ms per push | bytes per "
      "param | GB/s touched | memcpy GB/s | ratio |\n"
      "|---|---|---|---|---|---|---|---|---|\n");
  std::vector<ApplyRow> rows;
  for (int T : *thread_counts) {
    for (const std::string& oname : optimizers) {
      OptimizerOptions oo;
      oo.learning_rate = 0.01f;
      oo.momentum = oname == "momentum" ? 0.9f : 0.0f;
      auto opt = Optimizer::Create(oo);
      if (!opt.ok()) return Fail(opt.status());
      for (size_t k = 0; k < encodings->size(); ++k) {
        const Encoding& e = (*encodings)[k];
        for (bool apply_only : {true, false}) {
          if (apply_only && e.kind != Kind::kFp32) continue;
          ApplyRow row{oname, e.name,
                       apply_only ? "apply"
                       : (e.kind == Kind::kFp32 || e.kind == Kind::kBf16)
                           ? "decode+apply"
                           : "fused",
                       T};
          row.seconds = 1e30;
          for (int r = 0; r < rounds; ++r) {
            row.memcpy_bytes_per_s =
                std::max(row.memcpy_bytes_per_s, MemcpyRate(src, dst, T, reps));
            row.seconds = std::min(
                row.seconds, bench.ApplySeconds(e, apply_only, *opt, pushes[k],
                                                grads, w, v, staging, T, reps));
          }
          const double bytes =
              BytesTouched(e, apply_only, oo.momentum > 0, pushes[k][0], n);
          row.bytes_per_s = bytes / row.seconds;
          std::printf(
              "| %s | %s | %s | %d | %.2f | %.3f | %.2f | %.2f | %.2f |\n",
              row.optimizer.c_str(), row.encoding.c_str(), row.path.c_str(), T,
              row.seconds * 1e3, bytes / n, row.bytes_per_s / kGB,
              row.memcpy_bytes_per_s / kGB,
              row.bytes_per_s / row.memcpy_bytes_per_s);
          std::fflush(stdout);
          rows.push_back(row);
        }
      }
    }
  }

  // 4: server CPU per push, transport excluded, at the largest thread count.
  const int T = *std::max_element(thread_counts->begin(), thread_counts->end());
  std::printf(
      "\n## Server time per push, transport excluded (%d thread(s) = "
      "shards; validation on one thread)\n\n"
      "| optimizer | encoding | validate ms | decode+apply ms | pushes/s | "
      "vs fp32 |\n|---|---|---|---|---|---|\n",
      T);
  for (const std::string& oname : optimizers) {
    double fp32_rate = 0;
    for (size_t k = 0; k < encodings->size(); ++k) {
      const Encoding& e = (*encodings)[k];
      double apply = 0;
      for (const ApplyRow& row : rows) {
        if (row.threads == T && row.optimizer == oname &&
            row.encoding == e.name && row.path != "apply") {
          apply = row.seconds;
        }
      }
      const double validate = Bench::ParseSeconds(pushes[k][0], reps);
      const double rate = 1.0 / (validate + apply);
      if (e.kind == Kind::kFp32) fp32_rate = rate;
      const std::string versus =
          fp32_rate > 0 ? absl::StrFormat("%.2f", rate / fp32_rate) : "-";
      std::printf("| %s | %s | %.3f | %.2f | %.1f | %s |\n", oname.c_str(),
                  e.name.c_str(), validate * 1e3, apply * 1e3, rate,
                  versus.c_str());
      csv.push_back(absl::StrCat("csv,codec_server,", oname, ",", e.name, ",",
                                 T, ",", validate, ",", apply, ",", rate));
    }
  }

  std::printf(
      "\n# csv,codec_wire,encoding,wire_bytes,bits_per_param,chunks,"
      "encode_seconds\n"
      "# csv,codec_apply,optimizer,encoding,path,threads,seconds_per_push,"
      "bytes_per_s,memcpy_bytes_per_s,ratio\n"
      "# csv,codec_server,optimizer,encoding,threads,validate_seconds,"
      "apply_seconds,pushes_per_s\n");
  for (const std::string& line : csv) {
    if (absl::StartsWith(line, "csv,codec_wire"))
      std::printf("%s\n", line.c_str());
  }
  int met = 0, compressed = 0;
  double worst = 1e9;
  for (const ApplyRow& row : rows) {
    const double ratio = row.bytes_per_s / row.memcpy_bytes_per_s;
    std::printf("csv,codec_apply,%s,%s,%s,%d,%.4g,%.4g,%.4g,%.4f\n",
                row.optimizer.c_str(), row.encoding.c_str(), row.path.c_str(),
                row.threads, row.seconds, row.bytes_per_s,
                row.memcpy_bytes_per_s, ratio);
    if (row.path == "fused" &&
        (row.encoding == "onebit" || row.optimizer == "momentum")) {
      ++compressed;
      met += ratio >= 0.7;
      worst = std::min(worst, ratio);
    }
  }
  for (const std::string& line : csv) {
    if (absl::StartsWith(line, "csv,codec_server")) {
      std::printf("%s\n", line.c_str());
    }
  }
  std::printf(
      "# target fused decode+apply / memcpy >= 0.7 (1-bit, and top-k with "
      "momentum: the dense kernels): met at %d of %d rows (lowest %.2f); "
      "reported, not enforced\n",
      met, compressed, compressed > 0 ? worst : 0.0);
  std::printf("# codec_bench: load average at end: %s\n",
              LoadAverage().c_str());
  return 0;
}

}  // namespace
}  // namespace asgd::bench

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "Gradient encodings of the seed DNN: wire bytes, encode cost, fused "
      "decode+apply vs memcpy.\nExample: codec_bench --threads=1,2 --reps=4");
  absl::ParseCommandLine(argc, argv);
  return asgd::bench::Run();
}
