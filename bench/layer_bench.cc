// layer_bench: CPU speed of a training step (Forward + Backward) of the LSTM
// and conv layers (model/layers/), as achieved GFLOP/s against OpenBLAS's
// sgemm doing the same GEMMs (same M, N, K and transposes) in the same run.
//
//   bazel run -c opt //bench:layer_bench
//   layer_bench --lstm_cells=512 --lstm_inputs=40,512 --lstm_projection=256
//       --sequences=64 --steps=20 --cnn_rows=256 --blas_threads=1
//
// Rows:
//   lstm / lstmp / blstm  one LSTM layer (no projection / projection /
//                         bidirectional) over sequences × steps rows, for
//                         each --lstm_inputs. With a small input (< cells)
//                         the layer is taken as a model's first layer (no
//                         input gradient), else as a stacked one (input
//                         gradient computed).
//   conv1, conv2          the two conv layers of a CNN on (2*context+1) ×
//                         feature_dim inputs (conv1 first: no input gradient),
//   cnn                   and both in one step.
//
// FLOPs are 2 per multiply-add of the GEMM work the layer has to do; the
// element-wise work (gates, activations, pooling, im2col) is not counted, so
// it shows up as a ratio below 1. With n = sequences·steps rows, S =
// sequences, D inputs, N cells, R = projection or N, P = projection or 0,
// per direction:
//   LSTM forward MACs  = n·4N·D + (n−S)·4N·R + n·P·N
//   LSTM step FLOPs    = 2 · dirs · (forward MACs · 3 − [no input grad] n·4N·D)
//   conv forward MACs  = rows·positions·patch·filters, positions = conv
//                        output size before pooling, patch = channels ×
//                        kernel_time × kernel_freq
//   conv step FLOPs    = 2 · forward MACs · (3, or 2 without input gradient)
// (The first step of each direction has no recurrent GEMM: n − S.)
//
// The reference runs exactly the list of sgemm calls the layer makes in one
// step (the list is written out below, next to the layer it mirrors) on
// buffers of the same sizes. Each measurement times --iters steps; the layer
// and the reference alternate --repeats times and the best of each counts,
// so that both see the same machine. ratio = sgemm time / layer time = layer
// GFLOP/s / sgemm GFLOP/s. On a shared, busy machine, --clock=thread (CPU
// time of the one thread doing the work, with --blas_threads=1) leaves out
// the time slices other processes take; --only=KEY,... runs some rows.
#include <cblas.h>
#include <time.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <random>
#include <string>
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
#include "model/backend.h"
#include "model/layers/conv.h"
#include "model/layers/layer.h"
#include "model/layers/lstm.h"
#include "model/model_spec.h"

ABSL_FLAG(int, lstm_cells, 512, "LSTM cells.");
ABSL_FLAG(std::string, lstm_inputs, "40,512",
          "Comma-separated LSTM input sizes to time (empty: no LSTM rows).");
ABSL_FLAG(int, lstm_projection, 256, "Projection of the lstmp rows.");
ABSL_FLAG(int, sequences, 64, "Sequences per LSTM batch.");
ABSL_FLAG(int, steps, 20, "Steps per sequence.");
ABSL_FLAG(int, cnn_feature_dim, 40, "CNN input: frequency bins per frame.");
ABSL_FLAG(int, cnn_context, 5, "CNN input: frames each side.");
ABSL_FLAG(std::string, cnn_filters, "128,256",
          "Filters of the two conv layers (empty: no CNN rows).");
ABSL_FLAG(std::string, cnn_kernels, "3x8,3x4", "Kernels, time x frequency.");
ABSL_FLAG(std::string, cnn_pools, "1x3,1x1", "Pooling, time x frequency.");
ABSL_FLAG(int, cnn_rows, 256, "Rows (frames) per CNN batch.");
ABSL_FLAG(std::string, only, "",
          "Comma-separated row keys to run (the first CSV field, e.g. "
          "lstm_in40,conv1); empty: all.");
ABSL_FLAG(int, warmup, 1, "Untimed steps before each row.");
ABSL_FLAG(int, iters, 3, "Steps per timed measurement.");
ABSL_FLAG(int, repeats, 3, "Measurements of each of layer and sgemm.");
ABSL_FLAG(int, blas_threads, 1, "OpenBLAS threads.");
ABSL_FLAG(std::string, clock, "wall",
          "wall: elapsed time; thread: CPU time of the calling thread (with "
          "--blas_threads=1 all the work runs there; on a shared, busy "
          "machine it leaves out the time other processes held the core).");

namespace asgd {
namespace {

// Seconds on the clock --clock names (an arbitrary origin).
double Now() {
  static const bool thread = absl::GetFlag(FLAGS_clock) == "thread";
  timespec ts;
  clock_gettime(thread ? CLOCK_THREAD_CPUTIME_ID : CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

// One sgemm call, row-major: C[m, n] = op(A) op(B) (+ C when accumulate).
struct Gemm {
  bool trans_a = false;
  bool trans_b = false;
  int64_t m = 0, n = 0, k = 0;
  bool accumulate = false;
  int64_t macs() const { return m * n * k; }
};

// The sgemm calls of one LSTM training step (lstm.cc): per direction, the
// input GEMM, per step after the first the recurrent one, per step the
// projection; backward per step the projection's and the recurrent
// gradient, then dW_x, dW_r, dW_p and the input gradient over all rows.
std::vector<Gemm> LstmGemms(int in_dim, const LstmLayerSpec& s, int sequences,
                            int steps, bool input_gradient) {
  const int64_t n = int64_t{sequences} * steps, g4 = 4 * int64_t{s.cells};
  const int64_t rec = s.projection > 0 ? s.projection : s.cells;
  std::vector<Gemm> out;
  for (int d = 0; d < (s.bidirectional ? 2 : 1); ++d) {
    out.push_back({false, true, n, g4, in_dim, true});
    for (int t = 0; t < steps; ++t) {
      if (t > 0) out.push_back({false, true, sequences, g4, rec, true});
      if (s.projection > 0) {
        out.push_back({false, true, sequences, s.projection, s.cells, false});
      }
    }
    for (int t = steps - 1; t >= 0; --t) {
      if (s.projection > 0) {
        out.push_back({false, false, sequences, s.cells, s.projection, false});
      }
      if (t > 0) out.push_back({false, false, sequences, rec, g4, true});
    }
    out.push_back({true, false, g4, in_dim, n, false});
    if (steps > 1) out.push_back({true, false, g4, rec, n - sequences, false});
    if (s.projection > 0) {
      out.push_back({true, false, s.projection, s.cells, n, false});
    }
    if (input_gradient) out.push_back({false, false, n, in_dim, g4, d > 0});
  }
  return out;
}

// The sgemm calls of one conv training step (conv.cc): per block of rows,
// the forward GEMM; in Backward, per block, the filter gradient and (with
// an input gradient) the patch gradient.
std::vector<Gemm> ConvGemms(const FeatureShape& in, const ConvLayerSpec& c,
                            int rows, int block_rows, bool input_gradient) {
  const int64_t positions = int64_t{in.time - c.kernel_time + 1} *
                            (in.freq - c.kernel_freq + 1);
  const int64_t patch = int64_t{in.channels} * c.kernel_time * c.kernel_freq;
  std::vector<Gemm> out;
  for (int first = 0; first < rows; first += block_rows) {
    const int64_t m = std::min(block_rows, rows - first) * positions;
    out.push_back({false, true, m, c.filters, patch, false});
  }
  for (int first = 0; first < rows; first += block_rows) {
    const int64_t m = std::min(block_rows, rows - first) * positions;
    out.push_back({true, false, c.filters, patch, m, first > 0});
    if (input_gradient) out.push_back({false, false, m, patch, c.filters, false});
  }
  return out;
}

// Times `iters` runs of the GEMM list on private buffers.
class GemmReference {
 public:
  explicit GemmReference(std::vector<Gemm> gemms) : gemms_(std::move(gemms)) {
    int64_t a = 1, b = 1, c = 1;
    for (const Gemm& g : gemms_) {
      a = std::max(a, g.m * g.k);
      b = std::max(b, g.k * g.n);
      c = std::max(c, g.m * g.n);
    }
    a_.resize(a);
    b_.resize(b);
    c_.resize(c);
    std::mt19937 rng(3);
    std::uniform_real_distribution<float> u(-0.1f, 0.1f);
    for (std::vector<float>* v : {&a_, &b_, &c_}) {
      for (float& x : *v) x = u(rng);
    }
  }

  int64_t macs() const {
    int64_t total = 0;
    for (const Gemm& g : gemms_) total += g.macs();
    return total;
  }

  double Time(int iters) {
    const double start = Now();
    for (int i = 0; i < iters; ++i) {
      for (const Gemm& g : gemms_) {
        cblas_sgemm(CblasRowMajor, g.trans_a ? CblasTrans : CblasNoTrans,
                    g.trans_b ? CblasTrans : CblasNoTrans, g.m, g.n, g.k, 1.0f,
                    a_.data(), g.trans_a ? g.m : g.k, b_.data(),
                    g.trans_b ? g.k : g.n, g.accumulate ? 1.0f : 0.0f,
                    c_.data(), g.n);
      }
    }
    return Now() - start;
  }

 private:
  std::vector<Gemm> gemms_;
  std::vector<float> a_, b_, c_;
};

// One or more layers run as a training step: Forward of each in order, then
// Backward of each in reverse, on a random batch.
class LayerStep {
 public:
  struct Part {
    std::unique_ptr<Layer> layer;
    int64_t params;
  };

  LayerStep(std::vector<Part> parts, int sequences, int steps,
            bool input_gradient)
      : parts_(std::move(parts)),
        sequences_(sequences),
        steps_(steps),
        input_gradient_(input_gradient) {
    const int64_t rows = int64_t{sequences} * steps;
    std::mt19937 rng(1);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    acts_.emplace_back(rows * parts_[0].layer->in_shape().dim());
    for (float& x : acts_[0]) x = u(rng);
    for (Part& p : parts_) {
      params_.emplace_back(p.params);
      for (float& x : params_.back()) x = 0.1f * u(rng);
      dparams_.emplace_back(p.params);
      acts_.emplace_back(rows * p.layer->out_shape().dim());
      deltas_.emplace_back(rows * p.layer->in_shape().dim());
    }
    dout_.resize(acts_.back().size());
    for (float& x : dout_) x = 0.01f * u(rng);
  }

  double Time(int iters) {
    const double start = Now();
    for (int i = 0; i < iters; ++i) {
      for (size_t l = 0; l < parts_.size(); ++l) {
        parts_[l].layer->Forward(params_[l].data(), acts_[l].data(),
                                 sequences_, steps_, acts_[l + 1].data());
      }
      const float* dout = dout_.data();
      for (size_t l = parts_.size(); l-- > 0;) {
        float* din = l > 0 || input_gradient_ ? deltas_[l].data() : nullptr;
        parts_[l].layer->Backward(params_[l].data(), acts_[l].data(),
                                  acts_[l + 1].data(), dout, sequences_,
                                  steps_, dparams_[l].data(), din);
        dout = din;
      }
    }
    return Now() - start;
  }

 private:
  std::vector<Part> parts_;
  const int sequences_, steps_;
  const bool input_gradient_;
  std::vector<std::vector<float>> params_, dparams_, acts_, deltas_;
  std::vector<float> dout_;
};

struct Row {
  std::string name;
  std::string key;  // unique per row, for the CSV lines
  std::string config;
  int rows = 0;
  bool input_gradient = false;
  int64_t macs = 0;
  double layer_s = 0;  // per step, best measurement
  double gemm_s = 0;
};

// Whether --only lets the row `key` run.
bool Selected(const std::string& key) {
  const std::string only = absl::GetFlag(FLAGS_only);
  if (only.empty()) return true;
  for (absl::string_view k : absl::StrSplit(only, ',')) {
    if (k == key) return true;
  }
  return false;
}

Row Measure(const std::string& name, const std::string& key,
            const std::string& config, int rows, bool input_gradient,
            LayerStep& step, GemmReference& gemm) {
  const int warmup = absl::GetFlag(FLAGS_warmup);
  const int iters = absl::GetFlag(FLAGS_iters);
  std::fprintf(stderr, "timing %s %s ...\n", name.c_str(), config.c_str());
  if (warmup > 0) {
    step.Time(warmup);
    gemm.Time(warmup);
  }
  Row row{name, key, config, rows, input_gradient, gemm.macs(), 1e30, 1e30};
  for (int r = 0; r < absl::GetFlag(FLAGS_repeats); ++r) {
    row.layer_s = std::min(row.layer_s, step.Time(iters) / iters);
    row.gemm_s = std::min(row.gemm_s, gemm.Time(iters) / iters);
  }
  return row;
}

// A list of positive integers (bench_util.h); empty: none.
absl::StatusOr<std::vector<int>> ParseInts(absl::string_view flag,
                                           absl::string_view text) {
  if (text.empty()) return std::vector<int>{};
  return bench::ParseCountList(flag, text);
}

// "3x8,3x4" -> {{3, 8}, {3, 4}}.
absl::StatusOr<std::vector<std::pair<int, int>>> ParsePairs(
    absl::string_view flag, absl::string_view text) {
  std::vector<std::pair<int, int>> out;
  for (absl::string_view part : absl::StrSplit(text, ',', absl::SkipEmpty())) {
    std::vector<absl::string_view> xy = absl::StrSplit(part, 'x');
    int a = 0, b = 0;
    if (xy.size() != 2 || !absl::SimpleAtoi(xy[0], &a) ||
        !absl::SimpleAtoi(xy[1], &b) || a < 1 || b < 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--", flag, ": \"", part, "\" is not TIMExFREQ (e.g. 3x8)"));
    }
    out.push_back({a, b});
  }
  return out;
}

int Fail(const absl::Status& status) {
  std::fprintf(stderr, "layer_bench: %s\n", status.ToString().c_str());
  return 1;
}

absl::Status AddLstmRows(std::vector<Row>* rows) {
  auto inputs = ParseInts("lstm_inputs", absl::GetFlag(FLAGS_lstm_inputs));
  if (!inputs.ok()) return inputs.status();
  const int cells = absl::GetFlag(FLAGS_lstm_cells);
  const int sequences = absl::GetFlag(FLAGS_sequences);
  const int steps = absl::GetFlag(FLAGS_steps);
  const int projection = absl::GetFlag(FLAGS_lstm_projection);
  for (int in_dim : *inputs) {
    const bool input_gradient = in_dim >= cells;
    struct Kind {
      const char* name;
      int projection;
      bool bidirectional;
    };
    for (const Kind& kind : {Kind{"lstm", 0, false},
                             Kind{"lstmp", projection, false},
                             Kind{"blstm", 0, true}}) {
      const std::string key = absl::StrCat(kind.name, "_in", in_dim);
      if (!Selected(key)) continue;
      ModelSpec spec;
      spec.feature_dim = in_dim;
      spec.context = 0;
      LstmLayerSpec s;
      s.cells = cells;
      s.projection = kind.projection;
      s.bidirectional = kind.bidirectional;
      spec.layers = {LayerSpec::Lstm(s)};
      if (absl::Status st = ValidateModelSpec(spec); !st.ok()) return st;
      const int n = sequences * steps;
      std::vector<LayerStep::Part> parts;
      parts.push_back({std::make_unique<LstmLayer>(in_dim, s, n),
                       LayerParamCount(spec, 0)});
      LayerStep step(std::move(parts), sequences, steps, input_gradient);
      GemmReference gemm(LstmGemms(in_dim, s, sequences, steps, input_gradient));
      std::string config = absl::StrCat("in ", in_dim, ", ", cells, " cells");
      if (kind.projection > 0) absl::StrAppend(&config, ", proj ", kind.projection);
      absl::StrAppend(&config, ", ", sequences, "x", steps);
      rows->push_back(
          Measure(kind.name, key, config, n, input_gradient, step, gemm));
    }
  }
  return absl::OkStatus();
}

absl::Status AddCnnRows(std::vector<Row>* rows) {
  auto filters = ParseInts("cnn_filters", absl::GetFlag(FLAGS_cnn_filters));
  if (!filters.ok()) return filters.status();
  if (filters->empty()) return absl::OkStatus();
  auto kernels = ParsePairs("cnn_kernels", absl::GetFlag(FLAGS_cnn_kernels));
  if (!kernels.ok()) return kernels.status();
  auto pools = ParsePairs("cnn_pools", absl::GetFlag(FLAGS_cnn_pools));
  if (!pools.ok()) return pools.status();
  if (filters->size() != 2 || kernels->size() != 2 || pools->size() != 2) {
    return absl::InvalidArgumentError(
        "--cnn_filters, --cnn_kernels and --cnn_pools take two layers each");
  }
  ModelSpec spec;
  spec.feature_dim = absl::GetFlag(FLAGS_cnn_feature_dim);
  spec.context = absl::GetFlag(FLAGS_cnn_context);
  for (int i = 0; i < 2; ++i) {
    ConvLayerSpec c;
    c.filters = (*filters)[i];
    c.kernel_time = (*kernels)[i].first;
    c.kernel_freq = (*kernels)[i].second;
    c.pool_time = (*pools)[i].first;
    c.pool_freq = (*pools)[i].second;
    c.activation = Activation::kRelu;
    spec.layers.push_back(LayerSpec::Conv(c));
  }
  if (absl::Status st = ValidateModelSpec(spec); !st.ok()) return st;
  const int n = absl::GetFlag(FLAGS_cnn_rows);

  auto make = [&](int i) {
    return std::make_unique<ConvLayer>(LayerInputShape(spec, i),
                                       spec.layers[i].conv, n);
  };
  auto describe = [&](int i) {
    const ConvLayerSpec& c = spec.layers[i].conv;
    const FeatureShape in = LayerInputShape(spec, i);
    return absl::StrCat(in.channels, "x", in.time, "x", in.freq, " in, ",
                        c.filters, " filters ", c.kernel_time, "x",
                        c.kernel_freq, ", pool ", c.pool_time, "x",
                        c.pool_freq);
  };
  std::vector<Gemm> both;
  for (int i = 0; i < 2; ++i) {
    auto layer = make(i);
    const bool input_gradient = i > 0;
    std::vector<Gemm> gemms = ConvGemms(LayerInputShape(spec, i),
                                        spec.layers[i].conv, n,
                                        layer->block_rows(), input_gradient);
    both.insert(both.end(), gemms.begin(), gemms.end());
    const std::string name = absl::StrCat("conv", i + 1);
    if (!Selected(name)) continue;
    std::vector<LayerStep::Part> parts;
    parts.push_back({std::move(layer), LayerParamCount(spec, i)});
    LayerStep step(std::move(parts), n, 1, input_gradient);
    GemmReference gemm(std::move(gemms));
    rows->push_back(
        Measure(name, name, describe(i), n, input_gradient, step, gemm));
  }
  if (!Selected("cnn")) return absl::OkStatus();
  std::vector<LayerStep::Part> parts;
  for (int i = 0; i < 2; ++i) parts.push_back({make(i), LayerParamCount(spec, i)});
  LayerStep step(std::move(parts), n, 1, false);
  GemmReference gemm(std::move(both));
  rows->push_back(
      Measure("cnn", "cnn", "conv1 + conv2", n, false, step, gemm));
  return absl::OkStatus();
}

int Run() {
  const int threads = absl::GetFlag(FLAGS_blas_threads);
  if (threads < 1 || absl::GetFlag(FLAGS_iters) < 1 ||
      absl::GetFlag(FLAGS_repeats) < 1 || absl::GetFlag(FLAGS_warmup) < 0) {
    return Fail(absl::InvalidArgumentError(
        "--blas_threads, --iters and --repeats must be >= 1, --warmup >= 0"));
  }
  const std::string clock = absl::GetFlag(FLAGS_clock);
  if (clock != "wall" && clock != "thread") {
    return Fail(absl::InvalidArgumentError(
        absl::StrCat("--clock: \"", clock, "\" is neither wall nor thread")));
  }
  SetBlasThreads(threads);
  bench::PrintMachine("layer_bench");
  std::printf(
      "# OpenBLAS threads: %d; best of %d measurements of %d steps; %s "
      "clock\n",
      threads, absl::GetFlag(FLAGS_repeats), absl::GetFlag(FLAGS_iters),
      clock == "wall" ? "wall" : "thread CPU time");
  std::printf(
      "# FLOPs = 2 x GEMM multiply-adds of the step: LSTM forward MACs = "
      "n*4N*D + (n-S)*4N*R + n*P*N per direction, step = 3x forward "
      "(less n*4N*D without input gradient); conv forward MACs = "
      "rows*positions*patch*filters, step = 3x forward (2x without input "
      "gradient)\n");
  std::vector<Row> rows;
  if (absl::Status s = AddLstmRows(&rows); !s.ok()) return Fail(s);
  if (absl::Status s = AddCnnRows(&rows); !s.ok()) return Fail(s);

  std::printf(
      "\n| layer | config | rows | input grad | GFLOP/step | layer ms | "
      "layer GFLOP/s | sgemm ms | sgemm GFLOP/s | ratio |\n");
  std::printf("|---|---|---:|---|---:|---:|---:|---:|---:|---:|\n");
  for (const Row& r : rows) {
    const double gflop = 2.0 * r.macs / 1e9;
    std::printf("| %s | %s | %d | %s | %.3f | %.2f | %.1f | %.2f | %.1f | %.2f |\n",
                r.name.c_str(), r.config.c_str(), r.rows,
                r.input_gradient ? "yes" : "no", gflop, 1e3 * r.layer_s,
                gflop / r.layer_s, 1e3 * r.gemm_s, gflop / r.gemm_s,
                r.gemm_s / r.layer_s);
  }
  std::printf(
      "\ncsv,layer,rows,input_grad,gflop_per_step,layer_ms,layer_gflops,"
      "sgemm_ms,sgemm_gflops,ratio\n");
  for (const Row& r : rows) {
    const double gflop = 2.0 * r.macs / 1e9;
    std::printf("csv,%s,%d,%d,%.5f,%.4f,%.3f,%.4f,%.3f,%.4f\n", r.key.c_str(),
                r.rows, r.input_gradient ? 1 : 0, gflop, 1e3 * r.layer_s,
                gflop / r.layer_s, 1e3 * r.gemm_s, gflop / r.gemm_s,
                r.gemm_s / r.layer_s);
  }
  std::printf("# load at end: %s\n", bench::LoadAverage().c_str());
  return 0;
}

}  // namespace
}  // namespace asgd

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "Times a training step of the LSTM and conv layers against sgemm.\n"
      "  layer_bench --lstm_inputs=40,512 --cnn_rows=256 --blas_threads=1");
  absl::ParseCommandLine(argc, argv);
  return asgd::Run();
}
