// dnn_step_bench: times ModelBackend::ComputeGradient, one minibatch step of
// the worker (forward, softmax cross-entropy, backward; no optimizer), of a
// DNN, CNN, LSTM or BLSTM on the backends asked for, and prints a markdown
// table and CSV lines.
//
//   bazel run -c opt //bench:dnn_step_bench -- --backends=cpu,cuda
//   dnn_step_bench --models=dnn,cnn,lstm,blstm --backends=cpu,cuda
//   dnn_step_bench --backends=cpu --iters=3 --hidden=512,512 --num_classes=40
//
// Models (--models, comma-separated):
//   dnn    the MLP of --input_dim, --hidden, --num_classes (default: the seed
//          recipe's 440 inputs = 11 frames x 40 log-mel, 5 hidden layers of
//          2048, 2000 outputs), timed on batches of --batches rows;
//   cnn    the servers' --model presets (model/model_presets.h) with
//   lstm   --feature_dim, --context, --conv_filters, --lstm_cells,
//   blstm  --lstm_layers, --lstm_projection, --cell_clip, --preset_hidden and
//          --num_classes. cnn is a frame model (batches of --batches rows);
//          lstm and blstm see --sequences sequences of --steps steps each.
//
// Each configuration runs --warmup untimed steps, then --iters timed steps;
// std::chrono::steady_clock brackets the whole timed loop (ComputeGradient is
// synchronous: the gradient is in host memory when it returns).
//   minibatches/s = iters / elapsed
//   TFLOP/s       = 2 * TrainingMacsPerRow(spec) * rows * minibatches/s / 1e12
// TrainingMacsPerRow (model/model_spec.h) counts 3 multiply-adds per weight
// use per row (forward, input gradient, weight gradient; for a DNN, 3 x
// weights) and a conv layer's multiply-adds at every output position before
// pooling. Biases, activations, pooling, the LSTM cell updates and the
// softmax are not counted; the first layer's input gradient, which is not
// computed, is, so the rate slightly overstates the work done.
//
// --worker_step times what a GPU worker does per minibatch with its model
// resident on the backend (model/backend.h; the worker's
// --resident_model): upload the batch, compute, add the gradient to the
// backend's sum (AccumulateGradient; with --stage_batches, the default, the
// next minibatch announced first, so that the CUDA backend uploads it while
// this one computes, as in the worker) and, every --push_every minibatches,
// take the push: --push_encoding=onebit encodes the average with error
// feedback on the backend and downloads only the bytes (TakeOneBit, by the
// chunk plan of a pool of --servers servers, PushEncoder::one_bit_plan);
// topk selects the largest --top_k_fraction of each chunk with error
// feedback on the backend and downloads only the entries (TakeTopK, by
// PushEncoder::top_k_plan); bf16 rounds the average to bfloat16 on the
// backend and downloads that (TakeBf16); float32 downloads the average
// (TakeAverage). The model is loaded once
// before timing (a pull's cost; its time is printed on its own line).
//
// The CUDA step includes what the ModelBackend interface implies: uploading
// the parameters and the batch, and downloading the gradient (2 x 4 bytes per
// parameter per step), so at large widths it measures the host<->device link
// as much as the GEMMs. bench/torch_dnn_step.py prints the same table for
// PyTorch, with and without those copies.
#include <algorithm>
#include <chrono>
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
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/types/span.h"
#include "model/backend.h"
#include "model/backend_factory.h"
#include "model/model_presets.h"
#include "model/model_spec.h"
#include "common/model_layout.h"
#include "common/status_macros.h"
#include "compression/grad_codec.h"
#include "compression/one_bit_plan.h"
#include "compression/top_k_plan.h"
#include "worker/ps/push_encoder.h"

ABSL_FLAG(std::string, backends, "cpu,cuda",
          "Comma-separated backends to time: cpu, cuda, auto. A cuda backend "
          "on a machine without a CUDA device is skipped with a message.");
ABSL_FLAG(std::string, models, "dnn",
          "Comma-separated models to time: dnn, cnn, lstm, blstm.");
ABSL_FLAG(int, input_dim, 440,
          "dnn: input values per row (11 stacked frames of 40 log-mel).");
ABSL_FLAG(std::string, hidden, "2048,2048,2048,2048,2048",
          "dnn: hidden layer widths, comma-separated (empty: none).");
ABSL_FLAG(int, num_classes, 2000, "Output classes (every model).");
ABSL_FLAG(std::string, activation, "relu",
          "Hidden activation: relu, sigmoid or tanh (every model).");
ABSL_FLAG(int, feature_dim, 40, "cnn, lstm, blstm: features per frame.");
ABSL_FLAG(int, context, -1,
          "cnn, lstm, blstm: frames of context each side (-1: the preset's "
          "default, 5 for cnn, 0 for lstm and blstm).");
ABSL_FLAG(int, conv_filters, 128,
          "cnn: filters of the first conv layer (the second has twice as "
          "many).");
ABSL_FLAG(int, lstm_cells, 512, "lstm, blstm: cells per layer (direction).");
ABSL_FLAG(int, lstm_layers, 3, "lstm, blstm: recurrent layers.");
ABSL_FLAG(int, lstm_projection, 256,
          "lstm, blstm: recurrent projection (0: none).");
ABSL_FLAG(double, cell_clip, 0.0, "lstm, blstm: cell clip (0: none).");
ABSL_FLAG(std::string, preset_hidden, "auto",
          "cnn, lstm, blstm: dense layers after the conv or recurrent ones "
          "(auto: the preset's, 512 for cnn, none for lstm and blstm).");
ABSL_FLAG(std::string, batches, "256,1024",
          "dnn, cnn: comma-separated minibatch sizes (rows) to time.");
ABSL_FLAG(std::string, sequences, "16,64",
          "lstm, blstm: comma-separated sequences per minibatch to time.");
ABSL_FLAG(int, steps, 20, "lstm, blstm: steps (frames) per sequence.");
ABSL_FLAG(int, warmup, 3, "Untimed steps before each measurement.");
ABSL_FLAG(int, iters, 20, "Timed steps per measurement.");
ABSL_FLAG(std::string, cuda_math, "tf32,fp32",
          "Comma-separated CUDA GEMM modes to time: tf32, fp32.");
ABSL_FLAG(int, cuda_device, 0, "CUDA device ordinal.");
ABSL_FLAG(bool, cuda_profile, false,
          "On cuda, after each model's timings: the device time of every "
          "layer's forward and backward pass, step by step (GEMMs, "
          "element-wise passes, reductions), for the first of --batches "
          "(--sequences), as a markdown table.");
ABSL_FLAG(int, cuda_conv_dw_slice_rows, 0,
          "cnn on cuda: patch rows per slice of a conv layer's weight "
          "gradient GEMM (0: the layer's choice, 2,048 or more; a value of "
          "at least a block's rows: one GEMM per block). When set, the "
          "backend column says cuda+dw<N>.");
ABSL_FLAG(bool, worker_step, false,
          "Time the worker's step on a resident model (AccumulateGradient, "
          "and every --push_every steps TakeOneBit, TakeTopK, TakeBf16 or "
          "TakeAverage) "
          "instead of ComputeGradient.");
ABSL_FLAG(int, push_every, 1, "--worker_step: minibatches per push.");
ABSL_FLAG(bool, stage_batches, true,
          "--worker_step: two minibatches in turn, each announced to the "
          "backend a step ahead (ModelBackend::StageNext), as the worker's "
          "trainer does; false: nothing announced (the backend column says "
          "<backend>+worker-unstaged).");
ABSL_FLAG(std::string, push_encoding, "onebit",
          "--worker_step: onebit or topk (encoded on the backend), bf16 "
          "(rounded on the backend) or float32.");
ABSL_FLAG(double, top_k_fraction, 0.01,
          "--worker_step --push_encoding=topk: the share of each chunk sent.");
ABSL_FLAG(int, servers, 2,
          "--worker_step: servers the push is cut for (chunk plan).");
ABSL_FLAG(int, blas_threads, 0,
          "OpenBLAS threads for the cpu backend (0: OpenBLAS's default).");

namespace asgd {
namespace {

struct Row {
  std::string model;
  std::string backend;
  std::string math;
  int sequences = 0;
  int steps = 1;
  int iters = 0;
  double seconds = 0;
  int64_t macs_per_row = 0;
  int rows() const { return sequences * steps; }
  double per_s() const { return iters / seconds; }
  double tflops() const { return 2.0 * macs_per_row * rows() * per_s() / 1e12; }
};

absl::StatusOr<std::vector<int>> ParsePositiveList(absl::string_view flag,
                                                   absl::string_view text) {
  std::vector<int> values;
  for (absl::string_view part : absl::StrSplit(text, ',', absl::SkipEmpty())) {
    int v = 0;
    if (!absl::SimpleAtoi(part, &v) || v < 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--", flag, ": \"", part, "\" is not a positive integer"));
    }
    values.push_back(v);
  }
  if (values.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("--", flag, " is empty"));
  }
  return values;
}

// The model named `kind` from the flags.
absl::StatusOr<ModelSpec> ModelFor(absl::string_view kind) {
  auto activation = ParseActivation(absl::GetFlag(FLAGS_activation));
  if (!activation.ok()) return activation.status();
  if (kind == "dnn") {
    // One row of input_dim values (no context to add).
    ModelSpec spec;
    spec.feature_dim = absl::GetFlag(FLAGS_input_dim);
    spec.context = 0;
    spec.num_classes = absl::GetFlag(FLAGS_num_classes);
    auto hidden = ParseLayerSizes(absl::GetFlag(FLAGS_hidden));
    if (!hidden.ok()) return hidden.status();
    for (int h : *hidden) {
      spec.layers.push_back(LayerSpec::Dense(h, *activation));
    }
    absl::Status status = ValidateModelSpec(spec);
    if (!status.ok()) return status;
    return spec;
  }
  if (kind != "cnn" && kind != "lstm" && kind != "blstm") {
    return absl::InvalidArgumentError(absl::StrCat(
        "--models: unknown model \"", kind, "\" (dnn, cnn, lstm, blstm)"));
  }
  ModelShapeOptions o;
  o.kind = std::string(kind);
  o.feature_dim = absl::GetFlag(FLAGS_feature_dim);
  o.context = absl::GetFlag(FLAGS_context);
  o.num_classes = absl::GetFlag(FLAGS_num_classes);
  o.hidden = absl::GetFlag(FLAGS_preset_hidden);
  o.activation = absl::GetFlag(FLAGS_activation);
  o.conv_filters = absl::GetFlag(FLAGS_conv_filters);
  o.lstm_cells = absl::GetFlag(FLAGS_lstm_cells);
  o.lstm_layers = absl::GetFlag(FLAGS_lstm_layers);
  o.lstm_projection = absl::GetFlag(FLAGS_lstm_projection);
  o.cell_clip = static_cast<float>(absl::GetFlag(FLAGS_cell_clip));
  return PresetModel(o);
}

// Times `iters` calls of ComputeGradient after `warmup` untimed ones.
absl::StatusOr<double> TimeSteps(ModelBackend& backend,
                                 const std::vector<float>& params,
                                 const Batch& batch, int warmup, int iters) {
  std::vector<float> grad(params.size());
  for (int i = 0; i < warmup; ++i) {
    auto r = backend.ComputeGradient(params, batch, absl::MakeSpan(grad));
    if (!r.ok()) return r.status();
  }
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < iters; ++i) {
    auto r = backend.ComputeGradient(params, batch, absl::MakeSpan(grad));
    if (!r.ok()) return r.status();
  }
  const auto end = std::chrono::steady_clock::now();
  return std::chrono::duration<double>(end - start).count();
}

// What a --worker_step push takes from the backend: the 1-bit `plan`, the
// `top_k` plan, or with both empty the average as float32 or (bf16)
// bfloat16.
struct WorkerPush {
  OneBitPlan plan;
  TopKPlan top_k;
  bool bf16 = false;
};

// --worker_step: a resident model's step, as the worker's trainer takes it.
absl::StatusOr<double> TimeWorkerSteps(ModelBackend& backend,
                                       const std::vector<float>& params,
                                       const Batch& batch,
                                       const WorkerPush& push, int warmup,
                                       int iters) {
  const int push_every = absl::GetFlag(FLAGS_push_every);
  const OneBitPlan& plan = push.plan;
  std::vector<char> bytes(plan.total_bytes);
  const bool floats = plan.chunks.empty() && push.top_k.chunks.empty();
  std::vector<std::string> top_k_chunks;
  std::vector<float> average(floats && !push.bf16 ? params.size() : 0);
  std::vector<uint16_t> bf16(floats && push.bf16 ? params.size() : 0);
  const auto load_start = std::chrono::steady_clock::now();
  if (absl::Status s = backend.LoadModel(params); !s.ok()) return s;
  std::fprintf(stderr, "  model loaded onto the backend in %.3f ms\n",
               1e3 * std::chrono::duration<double>(
                         std::chrono::steady_clock::now() - load_start)
                         .count());
  // Two minibatches (the same values in two buffers) in turn, as the
  // trainer's look-ahead hands them: the next one announced before each step.
  const bool stage = absl::GetFlag(FLAGS_stage_batches);
  const std::vector<float> inputs2(batch.inputs.begin(), batch.inputs.end());
  const std::vector<int32_t> labels2(batch.labels.begin(), batch.labels.end());
  Batch other = batch;
  other.inputs = inputs2;
  other.labels = labels2;
  const Batch* turns[2] = {&batch, &other};
  int turn = 0;
  auto step = [&]() -> absl::Status {
    if (stage) backend.StageNext(*turns[1 - turn]);
    auto r = backend.AccumulateGradient(*turns[turn]);
    turn = 1 - turn;
    if (!r.ok()) return r.status();
    if (backend.accumulated() < push_every) return absl::OkStatus();
    if (!push.top_k.chunks.empty()) {
      return backend.TakeTopK(push.top_k, &top_k_chunks);
    }
    if (!floats) return backend.TakeOneBit(plan, absl::MakeSpan(bytes));
    return push.bf16 ? backend.TakeBf16(absl::MakeSpan(bf16))
                     : backend.TakeAverage(absl::MakeSpan(average));
  };
  for (int i = 0; i < warmup; ++i) {
    if (absl::Status s = step(); !s.ok()) return s;
  }
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < iters; ++i) {
    if (absl::Status s = step(); !s.ok()) return s;
  }
  const auto end = std::chrono::steady_clock::now();
  return std::chrono::duration<double>(end - start).count();
}

// The pushes a worker of `spec` sends a pool of --servers servers: the
// 1-bit plan, or float32 or bfloat16 averages.
absl::StatusOr<WorkerPush> WorkerPushPlan(const ModelSpec& spec) {
  const std::string encoding = absl::GetFlag(FLAGS_push_encoding);
  WorkerPush push;
  if (encoding == "float32") return push;
  if (encoding == "bf16") {
    push.bf16 = true;
    return push;
  }
  if (encoding != "onebit" && encoding != "topk") {
    return absl::InvalidArgumentError(absl::StrCat(
        "--push_encoding=", encoding, ": want onebit, topk, bf16 or float32"));
  }
  const PushEncoding kind =
      encoding == "topk" ? PushEncoding::kTopK : PushEncoding::kOneBit;
  const double fraction = absl::GetFlag(FLAGS_top_k_fraction);
  if (!(fraction > 0 && fraction <= 0.25)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--top_k_fraction=", fraction, ": want a share in (0, 0.25]"));
  }
  ASGD_ASSIGN_OR_RETURN(
      ModelLayout layout,
      ModelLayout::Create(ModelTensors(spec), absl::GetFlag(FLAGS_servers),
                          /*num_shards=*/2));
  PushEncoderOptions options;
  options.push_encoding = kind;
  options.top_k_fraction = fraction;
  options.max_chunk_elements = 1 << 20;
  options.compressed_chunk_elements = PushEncoder::CompressedChunkElements(
      layout, kind, fraction, kGradCodecMaxElements);
  ASGD_ASSIGN_OR_RETURN(std::unique_ptr<PushEncoder> encoder,
                        PushEncoder::Create(layout, options));
  push.plan = encoder->one_bit_plan();
  push.top_k = encoder->top_k_plan();
  return push;
}

int Fail(const absl::Status& status) {
  std::fprintf(stderr, "dnn_step_bench: %s\n", status.ToString().c_str());
  return 1;
}

int Run() {
  const int warmup = absl::GetFlag(FLAGS_warmup);
  const int iters = absl::GetFlag(FLAGS_iters);
  if (warmup < 0 || iters < 1) {
    return Fail(
        absl::InvalidArgumentError("--warmup must be >= 0 and --iters >= 1"));
  }
  const int steps = absl::GetFlag(FLAGS_steps);
  if (steps < 1)
    return Fail(absl::InvalidArgumentError("--steps must be >= 1"));
  std::vector<CudaOptions::MathMode> maths;
  for (absl::string_view m :
       absl::StrSplit(absl::GetFlag(FLAGS_cuda_math), ',', absl::SkipEmpty())) {
    auto mode = ParseCudaMathMode(m);
    if (!mode.ok()) return Fail(mode.status());
    maths.push_back(*mode);
  }
  if (maths.empty()) {
    return Fail(absl::InvalidArgumentError("--cuda_math is empty"));
  }
  if (absl::GetFlag(FLAGS_cuda_conv_dw_slice_rows) < 0) {
    return Fail(
        absl::InvalidArgumentError("--cuda_conv_dw_slice_rows must be >= 0"));
  }
  // Every model is built before anything is timed, so that a bad flag is an
  // error rather than half a table.
  std::vector<std::pair<std::string, ModelSpec>> models;
  for (absl::string_view kind :
       absl::StrSplit(absl::GetFlag(FLAGS_models), ',', absl::SkipEmpty())) {
    auto spec = ModelFor(kind);
    if (!spec.ok()) return Fail(spec.status());
    models.emplace_back(std::string(kind), *spec);
  }
  if (models.empty()) {
    return Fail(absl::InvalidArgumentError("--models is empty"));
  }
  std::vector<std::string> backends =
      absl::StrSplit(absl::GetFlag(FLAGS_backends), ',', absl::SkipEmpty());
  for (const std::string& name : backends) {
    if (name != "cpu" && name != "cuda" && name != "auto") {
      return Fail(absl::InvalidArgumentError(
          absl::StrCat("--backends: unknown backend \"", name, "\" (",
                       kBackendChoices, ")")));
    }
  }
  auto frame_batches =
      ParsePositiveList("batches", absl::GetFlag(FLAGS_batches));
  if (!frame_batches.ok()) return Fail(frame_batches.status());
  auto sequence_batches =
      ParsePositiveList("sequences", absl::GetFlag(FLAGS_sequences));
  if (!sequence_batches.ok()) return Fail(sequence_batches.status());
  if (absl::GetFlag(FLAGS_blas_threads) > 0) {
    SetBlasThreads(absl::GetFlag(FLAGS_blas_threads));
  }

  if (absl::GetFlag(FLAGS_worker_step)) {
    std::printf(
        "# Worker step on a resident model: AccumulateGradient, and every %d "
        "steps a %s push taken from the backend (backend column: "
        "<backend>+worker)\n",
        absl::GetFlag(FLAGS_push_every),
        absl::GetFlag(FLAGS_push_encoding).c_str());
  }
  std::printf(
      "# Training step (ComputeGradient); FLOPs per step = 2 x "
      "TrainingMacsPerRow x rows; %d warm-up + %d timed steps per row\n",
      warmup, iters);
  std::vector<Row> rows;
  for (const auto& [kind, spec] : models) {
    const bool sequence = spec.is_sequence();
    // Minibatches as sequences x steps: frame models one step per row.
    const std::vector<int>& counts =
        sequence ? *sequence_batches : *frame_batches;
    const int model_steps = sequence ? steps : 1;
    int max_rows = 0;
    for (int c : counts) max_rows = std::max(max_rows, c * model_steps);
    const int64_t macs = TrainingMacsPerRow(spec);
    std::printf(
        "# %s: %s; %lld parameters, %lld training multiply-adds per row\n",
        kind.c_str(), DescribeModel(spec).c_str(),
        static_cast<long long>(ModelParamCount(spec)),
        static_cast<long long>(macs));

    const std::vector<float> params = InitialParams(spec, 1);
    // --worker_step: the pushes' plan, the same for every measurement.
    absl::StatusOr<WorkerPush> plan = WorkerPush();
    if (absl::GetFlag(FLAGS_worker_step)) plan = WorkerPushPlan(spec);
    if (!plan.ok()) return Fail(plan.status());
    std::mt19937 rng(1);
    std::normal_distribution<float> normal;
    std::uniform_int_distribution<int32_t> label(0, spec.num_classes - 1);
    std::vector<float> inputs(static_cast<size_t>(max_rows) * spec.input_dim());
    for (float& v : inputs) v = normal(rng);
    std::vector<int32_t> labels(max_rows);
    for (int32_t& v : labels) v = label(rng);

    for (const std::string& name : backends) {
      const bool cpu_only = name == "cpu";
      // The CPU backend has one math mode; CUDA (and "auto") one per
      // --cuda_math.
      const size_t modes = cpu_only ? 1 : maths.size();
      for (size_t m = 0; m < modes; ++m) {
        CudaOptions options;
        options.device = absl::GetFlag(FLAGS_cuda_device);
        options.math = maths[m];
        options.conv_dw_slice_rows =
            absl::GetFlag(FLAGS_cuda_conv_dw_slice_rows);
        std::string note;
        auto backend = CreateBackend(name, spec, max_rows, &note, options);
        if (!backend.ok()) {
          if (backend.status().code() == absl::StatusCode::kUnavailable) {
            std::printf("# %s %s: skipped (%s)\n", kind.c_str(), name.c_str(),
                        std::string(backend.status().message()).c_str());
            break;
          }
          return Fail(backend.status());
        }
        std::printf("# %s %s: %s\n", kind.c_str(), name.c_str(), note.c_str());
        std::string backend_name((*backend)->name());
        if (backend_name == "cuda" && options.conv_dw_slice_rows > 0) {
          absl::StrAppend(&backend_name, "+dw", options.conv_dw_slice_rows);
        }
        const std::string math = backend_name != "cpu"
                                     ? std::string(CudaMathModeName(maths[m]))
                                     : "fp32";
        for (int count : counts) {
          std::fflush(stdout);
          std::fprintf(stderr, "timing %s %s %s %d x %d ...\n", kind.c_str(),
                       backend_name.c_str(), math.c_str(), count, model_steps);
          const size_t n = static_cast<size_t>(count) * model_steps;
          const Batch batch{
              count, model_steps,
              absl::MakeConstSpan(inputs).first(n * spec.input_dim()),
              absl::MakeConstSpan(labels).first(n)};
          const absl::StatusOr<double> seconds =
              absl::GetFlag(FLAGS_worker_step)
                  ? TimeWorkerSteps(**backend, params, batch, *plan, warmup,
                                    iters)
                  : TimeSteps(**backend, params, batch, warmup, iters);
          if (!seconds.ok()) return Fail(seconds.status());
          rows.push_back(
              {kind,
               absl::GetFlag(FLAGS_worker_step)
                   ? backend_name + (absl::GetFlag(FLAGS_stage_batches)
                                         ? "+worker"
                                         : "+worker-unstaged")
                   : backend_name,
               math, count, model_steps, iters, *seconds, macs});
        }
        if (backend_name == "cpu") break;  // "auto" fell back: one mode only
        if (absl::GetFlag(FLAGS_cuda_profile)) {
          const int sequences = counts.front();
          absl::StatusOr<std::string> profile =
              CudaLayerProfile(spec, sequences, model_steps, options, iters);
          if (!profile.ok()) return Fail(profile.status());
          std::printf(
              "\n## %s on %s (%s), %d x %d: device time by step\n\n%s\n",
              kind.c_str(), backend_name.c_str(), math.c_str(), sequences,
              model_steps, profile->c_str());
        }
      }
    }
  }

  std::printf(
      "\n| model | backend | math | sequences x steps | rows | minibatches/s "
      "| ms/step | TFLOP/s |\n");
  std::printf("|---|---|---|---:|---:|---:|---:|---:|\n");
  for (const Row& r : rows) {
    std::printf("| %s | %s | %s | %d x %d | %d | %.2f | %.3f | %.3f |\n",
                r.model.c_str(), r.backend.c_str(), r.math.c_str(), r.sequences,
                r.steps, r.rows(), r.per_s(), 1e3 / r.per_s(), r.tflops());
  }
  std::printf(
      "\ncsv,model,backend,math,sequences,steps,rows,iters,seconds,"
      "minibatches_per_s,ms_per_step,tflops\n");
  for (const Row& r : rows) {
    std::printf("csv,%s,%s,%s,%d,%d,%d,%d,%.6f,%.4f,%.4f,%.5f\n",
                r.model.c_str(), r.backend.c_str(), r.math.c_str(), r.sequences,
                r.steps, r.rows(), r.iters, r.seconds, r.per_s(),
                1e3 / r.per_s(), r.tflops());
  }
  return 0;
}

}  // namespace
}  // namespace asgd

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "Times ModelBackend::ComputeGradient of a DNN, CNN, LSTM or BLSTM on "
      "the given backends.\n"
      "  dnn_step_bench --models=dnn,cnn,lstm,blstm --backends=cpu,cuda "
      "--iters=20");
  absl::ParseCommandLine(argc, argv);
  return asgd::Run();
}
