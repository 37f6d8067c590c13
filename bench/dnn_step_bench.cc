// dnn_step_bench: times ModelBackend::ComputeGradient, one minibatch step of the
// worker (forward, softmax cross-entropy, backward; no optimizer), on the
// backends asked for, and prints a markdown table and CSV lines.
//
//   bazel run -c opt //bench:dnn_step_bench -- --backends=cpu,cuda
//   dnn_step_bench --backends=cpu --iters=3 --hidden=512,512 --num_classes=40
//
// The default model is the seed recipe's: 440 inputs (11 frames x 40 log-mel),
// 5 hidden layers of 2048, 2000 outputs; batches of 256 and 1024.
//
// Each configuration runs --warmup untimed steps, then --iters timed steps;
// std::chrono::steady_clock brackets the whole timed loop (ComputeGradient is
// synchronous: the gradient is in host memory when it returns).
//   minibatches/s = iters / elapsed
//   TFLOP/s       = 6 * batch * weights * minibatches/s / 1e12
// where weights = sum over layers of out * in (biases not counted): 2 FLOPs per
// weight and row in each of the forward GEMM, the input-gradient GEMM and the
// weight-gradient GEMM. (The first layer's input gradient is not computed, so
// this slightly overstates the work done; activations, softmax and bias sums
// are not counted.)
//
// The CUDA step includes what the ModelBackend interface implies: uploading the
// parameters and the batch, and downloading the gradient (2 x 4 bytes per
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
#include "model/model_spec.h"
#include "model/backend_factory.h"
#include "model/backend.h"

ABSL_FLAG(std::string, backends, "cpu,cuda",
          "Comma-separated backends to time: cpu, cuda, auto. A cuda backend "
          "on a machine without a CUDA device is skipped with a message.");
ABSL_FLAG(int, input_dim, 440,
          "Input values per row (11 stacked frames of 40 log-mel).");
ABSL_FLAG(std::string, hidden, "2048,2048,2048,2048,2048",
          "Hidden layer widths, comma-separated (empty: none).");
ABSL_FLAG(int, num_classes, 2000, "Output classes.");
ABSL_FLAG(std::string, activation, "relu",
          "Hidden activation: relu, sigmoid or tanh.");
ABSL_FLAG(std::string, batches, "256,1024",
          "Comma-separated minibatch sizes to time.");
ABSL_FLAG(int, warmup, 3, "Untimed steps before each measurement.");
ABSL_FLAG(int, iters, 20, "Timed steps per measurement.");
ABSL_FLAG(std::string, cuda_math, "tf32,fp32",
          "Comma-separated CUDA GEMM modes to time: tf32, fp32.");
ABSL_FLAG(int, cuda_device, 0, "CUDA device ordinal.");
ABSL_FLAG(int, blas_threads, 0,
          "OpenBLAS threads for the cpu backend (0: OpenBLAS's default).");

namespace asgd {
namespace {

struct Row {
  std::string backend;
  std::string math;
  int batch = 0;
  int iters = 0;
  double seconds = 0;
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

// Times `iters` calls of ComputeGradient after `warmup` untimed ones.
absl::StatusOr<double> TimeSteps(ModelBackend& dnn,
                                 const std::vector<float>& params,
                                 const std::vector<float>& inputs,
                                 const std::vector<int32_t>& labels, int batch,
                                 int warmup, int iters) {
  std::vector<float> grad(params.size());
  const Batch step{batch, 1,
                   absl::MakeConstSpan(inputs).first(
                       static_cast<size_t>(batch) * dnn.spec().input_dim()),
                   absl::MakeConstSpan(labels).first(batch)};
  for (int i = 0; i < warmup; ++i) {
    auto r = dnn.ComputeGradient(params, step, absl::MakeSpan(grad));
    if (!r.ok()) return r.status();
  }
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < iters; ++i) {
    auto r = dnn.ComputeGradient(params, step, absl::MakeSpan(grad));
    if (!r.ok()) return r.status();
  }
  const auto end = std::chrono::steady_clock::now();
  return std::chrono::duration<double>(end - start).count();
}

int Fail(const absl::Status& status) {
  std::fprintf(stderr, "dnn_step_bench: %s\n", status.ToString().c_str());
  return 1;
}

int Run() {
  // The DNN as a model of one row of input_dim values (no context to add).
  ModelSpec spec;
  spec.feature_dim = absl::GetFlag(FLAGS_input_dim);
  spec.context = 0;
  spec.num_classes = absl::GetFlag(FLAGS_num_classes);
  auto hidden = ParseLayerSizes(absl::GetFlag(FLAGS_hidden));
  if (!hidden.ok()) return Fail(hidden.status());
  auto activation = ParseActivation(absl::GetFlag(FLAGS_activation));
  if (!activation.ok()) return Fail(activation.status());
  for (int h : *hidden) spec.layers.push_back(LayerSpec::Dense(h, *activation));
  if (absl::Status s = ValidateModelSpec(spec); !s.ok()) return Fail(s);

  auto batches = ParsePositiveList("batches", absl::GetFlag(FLAGS_batches));
  if (!batches.ok()) return Fail(batches.status());
  const int warmup = absl::GetFlag(FLAGS_warmup);
  const int iters = absl::GetFlag(FLAGS_iters);
  if (warmup < 0 || iters < 1) {
    return Fail(
        absl::InvalidArgumentError("--warmup must be >= 0 and --iters >= 1"));
  }
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
  if (absl::GetFlag(FLAGS_blas_threads) > 0) {
    SetBlasThreads(absl::GetFlag(FLAGS_blas_threads));
  }

  int max_batch = 0;
  for (int b : *batches) max_batch = std::max(max_batch, b);
  const int64_t weights = TrainingMacsPerRow(spec) / 3;
  const std::vector<float> params = InitialParams(spec, 1);
  std::mt19937 rng(1);
  std::normal_distribution<float> normal;
  std::uniform_int_distribution<int32_t> label(0, spec.num_classes - 1);
  std::vector<float> inputs(static_cast<size_t>(max_batch) * spec.input_dim());
  for (float& v : inputs) v = normal(rng);
  std::vector<int32_t> labels(max_batch);
  for (int32_t& v : labels) v = label(rng);

  std::printf(
      "# DNN step (ComputeGradient): %s; %lld weights, %lld parameters\n",
      DescribeModel(spec).c_str(), static_cast<long long>(weights),
      static_cast<long long>(ModelParamCount(spec)));
  std::printf(
      "# FLOPs per step = 6 x batch x weights; %d warm-up + %d timed "
      "steps per row\n",
      warmup, iters);

  std::vector<Row> rows;
  for (absl::string_view name :
       absl::StrSplit(absl::GetFlag(FLAGS_backends), ',', absl::SkipEmpty())) {
    const bool cpu_only = name == "cpu";
    // The CPU backend has one math mode; CUDA (and "auto") one per --cuda_math.
    const size_t modes = cpu_only ? 1 : maths.size();
    for (size_t m = 0; m < modes; ++m) {
      CudaOptions options;
      options.device = absl::GetFlag(FLAGS_cuda_device);
      options.math = maths[m];
      std::string note;
      auto dnn = CreateBackend(name, spec, max_batch, &note, options);
      if (!dnn.ok()) {
        if (dnn.status().code() == absl::StatusCode::kUnavailable) {
          std::printf("# %s: skipped (%s)\n", std::string(name).c_str(),
                      std::string(dnn.status().message()).c_str());
          break;
        }
        return Fail(dnn.status());
      }
      std::printf("# %s: %s\n", std::string(name).c_str(), note.c_str());
      const std::string math = (*dnn)->name() == "cuda"
                                   ? std::string(CudaMathModeName(maths[m]))
                                   : "fp32";
      for (int batch : *batches) {
        std::fflush(stdout);
        std::fprintf(stderr, "timing %s %s batch %d ...\n",
                     std::string((*dnn)->name()).c_str(), math.c_str(), batch);
        auto seconds =
            TimeSteps(**dnn, params, inputs, labels, batch, warmup, iters);
        if (!seconds.ok()) return Fail(seconds.status());
        rows.push_back(
            {std::string((*dnn)->name()), math, batch, iters, *seconds});
      }
      if ((*dnn)->name() == "cpu") break;  // "auto" fell back: one mode only
    }
  }

  std::printf(
      "\n| backend | math | batch | minibatches/s | ms/step | TFLOP/s |\n");
  std::printf("|---|---|---:|---:|---:|---:|\n");
  for (const Row& r : rows) {
    const double per_s = r.iters / r.seconds;
    std::printf("| %s | %s | %d | %.2f | %.3f | %.3f |\n", r.backend.c_str(),
                r.math.c_str(), r.batch, per_s, 1e3 / per_s,
                6.0 * r.batch * weights * per_s / 1e12);
  }
  std::printf(
      "\ncsv,backend,math,batch,iters,seconds,minibatches_per_s,"
      "ms_per_step,tflops\n");
  for (const Row& r : rows) {
    const double per_s = r.iters / r.seconds;
    std::printf("csv,%s,%s,%d,%d,%.6f,%.4f,%.4f,%.5f\n", r.backend.c_str(),
                r.math.c_str(), r.batch, r.iters, r.seconds, per_s, 1e3 / per_s,
                6.0 * r.batch * weights * per_s / 1e12);
  }
  return 0;
}

}  // namespace
}  // namespace asgd

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "Times ModelBackend::ComputeGradient on the given backends.\n"
      "  dnn_step_bench --backends=cpu,cuda --batches=256,1024 --iters=20");
  absl::ParseCommandLine(argc, argv);
  return asgd::Run();
}
