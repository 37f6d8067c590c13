// The comparison harness of the CPU-vs-CUDA tests (backend_compare.h),
// checked on every machine, GPU or not: its double-precision reference
// agrees with the CPU backend on every model kind, its batches are
// time-major, clear every threshold decision by the margin asked for and
// (for the LSTMs) really clip, two CPU backends pass the comparison, and a
// backend that is wrong in a gradient element, a missing gradient element,
// the loss, a log-posterior or a prediction fails it.
#include "model/cuda/backend_compare.h"

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest-spi.h"
#include "gtest/gtest.h"
#include "model/cpu_backend.h"

namespace asgd {
namespace {

struct Case {
  std::string name;
  ModelSpec spec;
  int sequences;
  int steps;
};

ModelSpec SmallDnn() {
  ModelSpec spec;
  spec.feature_dim = 13;
  spec.context = 1;
  spec.layers = {LayerSpec::Dense(11, Activation::kRelu),
                 LayerSpec::Dense(9, Activation::kSigmoid)};
  spec.num_classes = 7;
  return spec;
}

std::vector<Case> Cases() {
  return {{"dnn", SmallDnn(), 9, 1},
          {"cnn_relu", CompareCnn(Activation::kRelu), 7, 1},
          {"cnn_tanh", CompareCnn(Activation::kTanh), 5, 1},
          {"lstm", CompareLstm(), 3, 5},
          {"blstm", CompareBlstm(), 2, 6}};
}

std::unique_ptr<ModelBackend> Cpu(const ModelSpec& spec, int max_rows) {
  auto backend = CreateCpuBackend(spec, max_rows);
  EXPECT_TRUE(backend.ok()) << backend.status();
  return backend.ok() ? std::move(*backend) : nullptr;
}

TEST(BackendCompareTest, ReferenceMatchesTheCpuBackend) {
  for (const Case& c : Cases()) {
    SCOPED_TRACE(c.name);
    ASSERT_TRUE(ValidateModelSpec(c.spec).ok());
    const std::vector<float> params = CompareParams(c.spec, 3);
    auto batch =
        MakeCompareBatch(c.spec, params, c.sequences, c.steps, 0.0, 0.0, 4);
    ASSERT_TRUE(batch.ok()) << batch.status();
    auto cpu = Cpu(c.spec, batch->rows());
    ASSERT_NE(cpu, nullptr);
    const int k = c.spec.num_classes;
    std::vector<float> logp(int64_t{batch->rows()} * k);
    ASSERT_TRUE(
        cpu->LogPosteriors(params, batch->batch(), absl::MakeSpan(logp)).ok());
    double worst = 0;
    for (int i = 0; i < batch->rows(); ++i) {
      const double* z = batch->ref_logits.data() + int64_t{i} * k;
      double mx = z[0];
      for (int j = 1; j < k; ++j) mx = std::max(mx, z[j]);
      double sum = 0;
      for (int j = 0; j < k; ++j) sum += std::exp(z[j] - mx);
      for (int j = 0; j < k; ++j) {
        const double want = z[j] - mx - std::log(sum);
        worst = std::max(worst, std::abs(logp[int64_t{i} * k + j] - want));
      }
    }
    EXPECT_LT(worst, 1e-4);
    // Not a model whose outputs ignore the input.
    double spread = 0;
    for (size_t j = k; j < batch->ref_logits.size(); ++j) {
      spread = std::max(
          spread, std::abs(batch->ref_logits[j] - batch->ref_logits[j % k]));
    }
    EXPECT_GT(spread, 1e-3);
  }
}

TEST(BackendCompareTest, BatchesAreTimeMajorAndClearEveryThreshold) {
  for (const Case& c : Cases()) {
    SCOPED_TRACE(c.name);
    const std::vector<float> params = CompareParams(c.spec, 5);
    const double clear = 1e-2;
    auto batch =
        MakeCompareBatch(c.spec, params, c.sequences, c.steps, clear, 0.3, 6);
    ASSERT_TRUE(batch.ok()) << batch.status();
    EXPECT_GE(batch->kink_margin, clear);
    const int d = c.spec.input_dim(), k = c.spec.num_classes;
    int unlabelled = 0;
    for (int32_t label : batch->labels) {
      unlabelled += label == kNoLabel;
      if (label != kNoLabel) {
        EXPECT_GE(label, 0);
        EXPECT_LT(label, k);
      }
    }
    EXPECT_GT(unlabelled, 0);
    EXPECT_LT(unlabelled, batch->rows());
    // Sequence b is rows b, S + b, 2S + b, ...: rerun the reference on it.
    for (int b = 0; b < c.sequences; ++b) {
      std::vector<float> seq;
      for (int t = 0; t < c.steps; ++t) {
        const float* row =
            batch->inputs.data() + (int64_t{t} * c.sequences + b) * d;
        seq.insert(seq.end(), row, row + d);
      }
      const ReferenceForward ref = RunReference(c.spec, params, seq, c.steps);
      EXPECT_GE(ref.kink_margin, clear);
      for (int t = 0; t < c.steps; ++t) {
        for (int j = 0; j < k; ++j) {
          EXPECT_EQ(ref.logits[int64_t{t} * k + j],
                    batch->ref_logits[(int64_t{t} * c.sequences + b) * k + j]);
        }
      }
    }
    const bool clips = c.name == "lstm" || c.name == "blstm";
    if (clips) {
      EXPECT_GT(batch->clipped, 0) << "the cell clip never acts";
    }
  }
}

// The clipping models clip at the tf32 tests' margin too, on every seed the
// CUDA tests use.
TEST(BackendCompareTest, LstmBatchesClipAtTheTestMargins) {
  for (const ModelSpec& spec : {CompareLstm(), CompareBlstm()}) {
    for (uint32_t seed : {11u, 12u, 13u, 14u}) {
      const std::vector<float> params = CompareParams(spec, seed);
      auto batch = MakeCompareBatch(spec, params, 4, 5, 2e-2, 0.25, seed + 1);
      ASSERT_TRUE(batch.ok()) << batch.status();
      EXPECT_GT(batch->clipped, 0) << DescribeModel(spec) << " seed " << seed;
    }
  }
}

TEST(BackendCompareTest, TwoCpuBackendsAgree) {
  for (const Case& c : Cases()) {
    const std::vector<float> params = CompareParams(c.spec, 7);
    auto batch =
        MakeCompareBatch(c.spec, params, c.sequences, c.steps, 1e-3, 0.25, 8);
    ASSERT_TRUE(batch.ok()) << batch.status();
    auto a = Cpu(c.spec, batch->rows());
    auto b = Cpu(c.spec, batch->rows());
    ASSERT_TRUE(a != nullptr && b != nullptr);
    const CompareReport r =
        ExpectBackendsAgree(*a, *b, params, *batch,
                            ToleranceFor(CudaOptions::MathMode::kFp32), c.name);
    EXPECT_EQ(r.grad, 0);
    EXPECT_EQ(r.loss, 0);
    EXPECT_EQ(r.logp, 0);
  }
}

// The CPU backend with one thing wrong.
class WrongBackend final : public ModelBackend {
 public:
  enum class Fault {
    kGradient,
    kMissingGradient,
    kLoss,
    kLogPosterior,
    kPrediction
  };
  WrongBackend(std::unique_ptr<ModelBackend> inner, Fault fault, int64_t at)
      : inner_(std::move(inner)), fault_(fault), at_(at) {}

  absl::string_view name() const override { return "wrong"; }
  const ModelSpec& spec() const override { return inner_->spec(); }
  int max_rows() const override { return inner_->max_rows(); }

  absl::StatusOr<BatchResult> ComputeGradient(absl::Span<const float> params,
                                              const Batch& batch,
                                              absl::Span<float> grad) override {
    std::vector<float> mine(grad.size());
    auto r = inner_->ComputeGradient(params, batch, absl::MakeSpan(mine));
    if (!r.ok()) return r;
    for (size_t j = 0; j < grad.size(); ++j) {
      if (fault_ == Fault::kMissingGradient && static_cast<int64_t>(j) == at_) {
        continue;  // left as the caller had it
      }
      grad[j] = mine[j];
    }
    if (fault_ == Fault::kGradient)
      grad[at_] += 0.1f * std::abs(grad[at_]) + 1e-3f;
    if (fault_ == Fault::kLoss) r->loss *= 1.01;
    return r;
  }

  absl::Status LogPosteriors(absl::Span<const float> params, const Batch& batch,
                             absl::Span<float> out) override {
    absl::Status s = inner_->LogPosteriors(params, batch, out);
    if (s.ok() && fault_ == Fault::kLogPosterior) out[at_] -= 0.01f;
    return s;
  }

  absl::Status Predict(absl::Span<const float> params, const Batch& batch,
                       absl::Span<int32_t> out) override {
    absl::Status s = inner_->Predict(params, batch, out);
    if (s.ok() && fault_ == Fault::kPrediction) {
      out[at_] = (out[at_] + 1) % spec().num_classes;
    }
    return s;
  }

 private:
  std::unique_ptr<ModelBackend> inner_;
  const Fault fault_;
  const int64_t at_;
};

TEST(BackendCompareTest, ReportsAWrongBackend) {
  const ModelSpec spec = CompareBlstm();
  const std::vector<float> params = CompareParams(spec, 9);
  auto batch = MakeCompareBatch(spec, params, 3, 4, 1e-3, 0.25, 10);
  ASSERT_TRUE(batch.ok()) << batch.status();
  // A row whose prediction is clear, for the prediction fault.
  int clear_row = 0;
  while (batch->logit_margin[clear_row] < 1e-2) ++clear_row;
  // An element of the backward direction's w_r of the first layer.
  int64_t in_w_r = -1, offset = 0;
  for (const TensorSpec& t : ModelTensors(spec)) {
    if (t.name == "layer0/bw/w_r") in_w_r = offset + 5;
    int64_t n = 1;
    for (int64_t d : t.shape) n *= d;
    offset += n;
  }
  ASSERT_GE(in_w_r, 0);
  const CompareTolerance tol = ToleranceFor(CudaOptions::MathMode::kFp32);
  using Fault = WrongBackend::Fault;
  const struct {
    Fault fault;
    int64_t at;
    const char* message;
  } kFaults[] = {
      {Fault::kGradient, in_w_r, "layer0/bw/w_r"},
      {Fault::kMissingGradient, ModelParamCount(spec) - 1, "layer2/bias"},
      {Fault::kLoss, 0, "loss"},
      {Fault::kLogPosterior, 7, "log-posterior of row 1"},
      {Fault::kPrediction, clear_row, "prediction of row"},
  };
  for (const auto& f : kFaults) {
    auto cpu = Cpu(spec, batch->rows());
    WrongBackend wrong(Cpu(spec, batch->rows()), f.fault, f.at);
    EXPECT_NONFATAL_FAILURE(
        ExpectBackendsAgree(*cpu, wrong, params, *batch, tol, "wrong"),
        f.message);
  }
}

}  // namespace
}  // namespace asgd
