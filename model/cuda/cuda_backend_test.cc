// The CUDA backend against the CPU backend (worker/dnn.h), which dnn_test.cc
// checks against finite differences. With a CUDA device: the loss, the
// correct count, every gradient tensor and Predict, for relu and sigmoid, fp32
// and tf32 GEMMs, batches of 256, 1 and 7 rows on one instance (reuse of its
// buffers), on shapes with no hidden layer, widths that are no multiple of 32,
// more classes than a block has threads, and the seed model's 440-512-512-40.
// Without a device, the GPU tests skip and the tests of the error paths run.
//
// Tolerances, per gradient tensor: max |gpu - cpu| <= tol * max |cpu|, with
// tol 1e-4 (fp32) and 2e-2 (tf32, whose GEMM inputs keep 10 mantissa bits).
// The loss within 1e-4 * (1 + loss) (fp32) and 1e-2 (tf32).
//
// Two things legitimately differ between correct backends and are kept out of
// the comparison: an argmax between two logits closer than the GEMM rounding
// (such rows may count either way), and a ReLU unit whose pre-activation is
// so close to 0 that rounding puts it on either side, which flips its
// gradient. The ReLU inputs are therefore drawn so that every hidden
// pre-activation is at least 100x the rounding error away from 0 (checked on
// a double-precision forward pass).
#include "model/cuda/cuda_backend.h"

#include <algorithm>
#include <cmath>
#include <ostream>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "model/backend.h"
#include "model/cpu_backend.h"

namespace asgd {

// Readable test parameters in gtest's messages (found by argument-dependent
// lookup, so in namespace asgd itself).
void PrintTo(Activation act, std::ostream* os) { *os << ActivationName(act); }
void PrintTo(CudaOptions::MathMode math, std::ostream* os) {
  *os << CudaMathModeName(math);
}

namespace {

int NumLayers(const ModelSpec& spec) {
  return static_cast<int>(spec.layers.size()) + 1;
}

// The activation of every hidden layer of the DNNs below (relu without one).
Activation HiddenActivation(const ModelSpec& spec) {
  return spec.layers.empty() ? Activation::kRelu
                             : spec.layers[0].dense.activation;
}

// The earlier tests' calls: a batch of single rows.
absl::StatusOr<BatchResult> Grad(ModelBackend& backend,
                                 absl::Span<const float> params,
                                 absl::Span<const float> x,
                                 absl::Span<const int32_t> labels,
                                 absl::Span<float> grad) {
  return backend.ComputeGradient(
      params, Batch{static_cast<int>(labels.size()), 1, x, labels}, grad);
}

absl::Status Pred(ModelBackend& backend, absl::Span<const float> params,
                  absl::Span<const float> x, absl::Span<int32_t> out) {
  return backend.Predict(params, Batch{static_cast<int>(out.size()), 1, x, {}},
                         out);
}

using MathMode = CudaOptions::MathMode;
using ::testing::HasSubstr;

#define SKIP_WITHOUT_CUDA()                         \
  do {                                              \
    if (!CudaDeviceAvailable()) {                   \
      GTEST_SKIP() << CudaDeviceStatus().message(); \
    }                                               \
  } while (false)

struct Shape {
  const char* name;
  int input_dim;
  std::vector<int> hidden;
  int num_classes;
};

const Shape& ShapeAt(int i) {
  static const auto* const kShapes = new std::vector<Shape>{
      {"NoHidden", 37, {}, 13},
      {"OddWidths", 45, {33, 67, 100}, 29},
      {"WideOutput", 50, {300}, 1001},
      {"Seed440x512x512x40", 440, {512, 512}, 40},
  };
  return (*kShapes)[i];
}
constexpr int kNumShapes = 4;

struct Tolerance {
  double grad;        // relative to the tensor's largest |element|
  double loss;        // fp32: times (1 + loss); tf32: absolute
  double margin;      // logit gap below which an argmax may differ
  double relu_clear;  // |hidden pre-activation| kept above this for ReLU
};

Tolerance ToleranceFor(MathMode math) {
  if (math == MathMode::kFp32) return {1e-4, 1e-4, 1e-4, 1e-4};
  return {2e-2, 1e-2, 2e-2, 2e-3};
}

// The DNN of `shape`: one frame of input_dim features, no context.
ModelSpec SpecFor(const Shape& shape, Activation act) {
  ModelSpec spec;
  spec.feature_dim = shape.input_dim;
  spec.context = 0;
  for (int h : shape.hidden) spec.layers.push_back(LayerSpec::Dense(h, act));
  spec.num_classes = shape.num_classes;
  return spec;
}

// Offset of layer l's weight in the flat vector; its bias follows it.
int64_t WeightOffset(const ModelSpec& spec, int l) {
  int64_t offset = 0;
  for (int i = 0; i < l; ++i) {
    offset += int64_t{LayerOutputShape(spec, i).dim()} * (LayerInputShape(spec, i).dim() + 1);
  }
  return offset;
}

// One row through the model in double: the logits. `min_hidden_abs` gets the
// smallest |pre-activation| of any hidden unit (infinity without hidden
// layers).
std::vector<double> ReferenceRow(const ModelSpec& spec,
                                 const std::vector<float>& params,
                                 const float* x, double* min_hidden_abs) {
  std::vector<double> a(x, x + spec.input_dim());
  *min_hidden_abs = INFINITY;
  for (int l = 0; l < NumLayers(spec); ++l) {
    const int in = LayerInputShape(spec, l).dim(), out = LayerOutputShape(spec, l).dim();
    const float* w = params.data() + WeightOffset(spec, l);
    const float* b = w + int64_t{out} * in;
    std::vector<double> z(out);
    for (int o = 0; o < out; ++o) {
      double s = b[o];
      for (int k = 0; k < in; ++k) s += double{w[int64_t{o} * in + k]} * a[k];
      z[o] = s;
    }
    if (l + 1 < NumLayers(spec)) {
      for (double& v : z) {
        *min_hidden_abs = std::min(*min_hidden_abs, std::abs(v));
        v = HiddenActivation(spec) == Activation::kRelu ? std::max(v, 0.0)
                                                 : 1.0 / (1.0 + std::exp(-v));
      }
    }
    a = std::move(z);
  }
  return a;
}

struct Batch {
  std::vector<float> x;
  std::vector<int32_t> labels;
  std::vector<int> ref_argmax;     // of the double-precision logits
  std::vector<double> ref_margin;  // top logit minus the runner-up
};

// Initial weights plus noise, and biases that are not zero.
std::vector<float> TestParams(const ModelSpec& spec, uint32_t seed) {
  std::vector<float> params = InitialParams(spec, seed);
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal;
  for (float& p : params) p += 0.01f * normal(rng);
  for (int l = 0; l < NumLayers(spec); ++l) {
    float* b = params.data() + WeightOffset(spec, l) +
               int64_t{LayerOutputShape(spec, l).dim()} * LayerInputShape(spec, l).dim();
    for (int o = 0; o < LayerOutputShape(spec, l).dim(); ++o) b[o] = 0.1f * normal(rng);
  }
  return params;
}

// n rows of N(0, 1) inputs with random labels. For ReLU, rows are redrawn
// until no hidden pre-activation is within `relu_clear` of 0.
Batch TestBatch(const ModelSpec& spec, const std::vector<float>& params, int n,
                double relu_clear, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal;
  std::uniform_int_distribution<int> label(0, spec.num_classes - 1);
  Batch batch;
  batch.x.resize(int64_t{n} * spec.input_dim());
  for (int i = 0; i < n; ++i) {
    float* row = batch.x.data() + int64_t{i} * spec.input_dim();
    std::vector<double> logits;
    for (int attempt = 0;; ++attempt) {
      for (int k = 0; k < spec.input_dim(); ++k) row[k] = normal(rng);
      double min_hidden_abs;
      logits = ReferenceRow(spec, params, row, &min_hidden_abs);
      if (HiddenActivation(spec) != Activation::kRelu ||
          min_hidden_abs >= relu_clear) {
        break;
      }
      if (attempt == 10000) {
        ADD_FAILURE() << "no input row keeps the ReLUs clear of 0";
        break;
      }
    }
    batch.labels.push_back(label(rng));
    const auto top = std::max_element(logits.begin(), logits.end());
    double second = -INFINITY;
    for (auto it = logits.begin(); it != logits.end(); ++it) {
      if (it != top) second = std::max(second, *it);
    }
    batch.ref_argmax.push_back(static_cast<int>(top - logits.begin()));
    batch.ref_margin.push_back(*top - second);
  }
  return batch;
}

// max |got - want| <= tol * max |want| for each weight and bias tensor.
// Returns the largest max |got - want| / max |want| seen.
double ExpectGradientsNear(const ModelSpec& spec, const std::vector<float>& want,
                           const std::vector<float>& got, double tol,
                           const std::string& context) {
  EXPECT_EQ(want.size(), got.size());
  if (want.size() != got.size()) return INFINITY;
  double worst_ratio = 0;
  for (int l = 0; l < NumLayers(spec); ++l) {
    const int64_t weights = int64_t{LayerOutputShape(spec, l).dim()} * LayerInputShape(spec, l).dim();
    const int64_t begin[2] = {WeightOffset(spec, l),
                              WeightOffset(spec, l) + weights};
    const int64_t size[2] = {weights, LayerOutputShape(spec, l).dim()};
    for (int part = 0; part < 2; ++part) {
      double max_want = 0, max_err = 0;
      int64_t worst = begin[part];
      for (int64_t j = begin[part]; j < begin[part] + size[part]; ++j) {
        max_want = std::max(max_want, std::abs(double{want[j]}));
        const double err = std::abs(double{got[j]} - want[j]);
        if (std::isnan(err) || err > max_err) {  // NaN sticks and fails
          max_err = err;
          worst = j;
        }
      }
      EXPECT_LE(max_err, tol * std::max(max_want, 1e-12))
          << context << ": layer " << l << (part == 0 ? " weight" : " bias")
          << ", largest error at flat index " << worst << ": cpu "
          << want[worst] << ", cuda " << got[worst] << " (tensor max |cpu| "
          << max_want << ")";
      worst_ratio = std::max(worst_ratio, max_err / std::max(max_want, 1e-12));
    }
  }
  return worst_ratio;
}

// (shape index, activation, GEMM math).
using Param = std::tuple<int, Activation, MathMode>;

std::string ParamName(const Param& param) {
  const auto [shape_index, act, math] = param;
  return std::string(ShapeAt(shape_index).name) + "_" +
         std::string(ActivationName(act)) + "_" +
         std::string(CudaMathModeName(math));
}

class CudaDnnMatchesCpuTest : public ::testing::TestWithParam<Param> {};

TEST_P(CudaDnnMatchesCpuTest, GradientLossAccuracyAndPredict) {
  SKIP_WITHOUT_CUDA();
  const auto [shape_index, act, math] = GetParam();
  const ModelSpec spec = SpecFor(ShapeAt(shape_index), act);
  const Tolerance tol = ToleranceFor(math);
  constexpr int kMaxBatch = 256;
  CudaOptions options;
  options.math = math;
  auto gpu = CreateCudaBackend(spec, kMaxBatch, options);
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  EXPECT_EQ((*gpu)->name(), "cuda");
  auto cpu = CreateCpuBackend(spec, kMaxBatch);
  ASSERT_TRUE(cpu.ok()) << cpu.status();

  const std::vector<float> params = TestParams(spec, 17 + shape_index);
  double worst_grad_error = 0, worst_loss_error = 0;
  // Largest batch first: later, smaller ones must not see its leftovers.
  for (int n : {256, 1, 7}) {
    const std::string context =
        ParamName(GetParam()) + " batch " + std::to_string(n);
    SCOPED_TRACE(context);
    const Batch batch = TestBatch(spec, params, n, tol.relu_clear, 100 + n);

    std::vector<float> cpu_grad(params.size()), gpu_grad(params.size(), NAN);
    auto want = Grad(**cpu, params, batch.x, batch.labels,
                                        absl::MakeSpan(cpu_grad));
    ASSERT_TRUE(want.ok()) << want.status();
    auto got = Grad(**gpu, params, batch.x, batch.labels,
                                       absl::MakeSpan(gpu_grad));
    ASSERT_TRUE(got.ok()) << got.status();

    if (math == MathMode::kFp32) {
      EXPECT_NEAR(got->loss, want->loss, tol.loss * (1 + want->loss));
    } else {
      EXPECT_NEAR(got->loss, want->loss, tol.loss);
    }
    worst_grad_error = std::max(
        worst_grad_error,
        ExpectGradientsNear(spec, cpu_grad, gpu_grad, tol.grad, context));
    worst_loss_error =
        std::max(worst_loss_error, std::abs(got->loss - want->loss));

    // Rows whose two best logits are clear apart must agree exactly.
    int sure_hits = 0, unsure = 0;
    for (int i = 0; i < n; ++i) {
      if (batch.ref_margin[i] < tol.margin) {
        ++unsure;
      } else {
        sure_hits += batch.ref_argmax[i] == batch.labels[i];
      }
    }
    EXPECT_GE(got->correct, sure_hits);
    EXPECT_LE(got->correct, sure_hits + unsure);

    std::vector<int32_t> predicted(n, -1);
    ASSERT_TRUE(
        Pred(**gpu, params, batch.x, absl::MakeSpan(predicted)).ok());
    for (int i = 0; i < n; ++i) {
      if (batch.ref_margin[i] >= tol.margin) {
        EXPECT_EQ(predicted[i], batch.ref_argmax[i]) << "row " << i;
      } else {
        EXPECT_GE(predicted[i], 0);
        EXPECT_LT(predicted[i], spec.num_classes);
      }
    }
  }
  // How close the run came to the tolerances (see test.xml).
  RecordProperty("max_relative_grad_error", absl::StrCat(worst_grad_error));
  RecordProperty("max_loss_error", absl::StrCat(worst_loss_error));
}

std::string CaseName(const ::testing::TestParamInfo<Param>& info) {
  return ParamName(info.param);
}

INSTANTIATE_TEST_SUITE_P(
    ShapesActivationsMath, CudaDnnMatchesCpuTest,
    ::testing::Combine(::testing::Range(0, kNumShapes),
                       ::testing::Values(Activation::kRelu,
                                         Activation::kSigmoid),
                       ::testing::Values(MathMode::kFp32, MathMode::kTf32)),
    CaseName);

TEST(CudaDnnTest, RepeatedCallsAreBitwiseIdentical) {
  SKIP_WITHOUT_CUDA();
  const ModelSpec spec = SpecFor(ShapeAt(1), Activation::kSigmoid);
  auto gpu = CreateCudaBackend(spec, 64);
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  const std::vector<float> params = TestParams(spec, 3);
  const Batch batch = TestBatch(spec, params, 64, 0, 4);
  std::vector<float> first(params.size()), second(params.size());
  auto a = Grad(**gpu, params, batch.x, batch.labels,
                                   absl::MakeSpan(first));
  auto b = Grad(**gpu, params, batch.x, batch.labels,
                                   absl::MakeSpan(second));
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->loss, b->loss);
  EXPECT_EQ(a->correct, b->correct);
  EXPECT_EQ(first, second);
}

// Exactly equal logits: the argmax is the first of them, as in the CPU
// backend (std::max_element), also when the tied classes fall to different
// threads of the row's block (1001 classes, 256 threads).
TEST(CudaDnnTest, ArgmaxTiesGoToTheFirstClass) {
  SKIP_WITHOUT_CUDA();
  ModelSpec spec;
  spec.feature_dim = 5;
  spec.context = 0;
  spec.num_classes = 1001;
  // Zero weights: every logit is its bias, exactly.
  std::vector<float> all_equal(ModelParamCount(spec), 0.0f);
  std::vector<float> three_tied = all_equal;
  float* bias = three_tied.data() + 5 * 1001;
  for (int k = 0; k < 1001; ++k) bias[k] = 0.25f * (k % 3);  // max 0.5
  for (int k : {1000, 300, 700}) bias[k] = 2.0f;  // threads 232, 44, 188
  std::vector<float> x(2 * 5, 1.0f);
  for (const auto& [params, want] :
       {std::make_pair(all_equal, 0), std::make_pair(three_tied, 300)}) {
    for (MathMode math : {MathMode::kFp32, MathMode::kTf32}) {
      CudaOptions options;
      options.math = math;
      auto gpu = CreateCudaBackend(spec, 2, options);
      ASSERT_TRUE(gpu.ok()) << gpu.status();
      std::vector<int32_t> predicted(2, -1);
      ASSERT_TRUE(Pred(**gpu, params, x, absl::MakeSpan(predicted)).ok());
      EXPECT_EQ(predicted, std::vector<int32_t>({want, want}));
      std::vector<float> grad(params.size());
      auto r =
          Grad(**gpu, params, x, {want, 1}, absl::MakeSpan(grad));
      ASSERT_TRUE(r.ok()) << r.status();
      EXPECT_EQ(r->correct, 1);
    }
  }
}

TEST(CudaDnnTest, RejectsBadInputLikeTheCpuBackend) {
  SKIP_WITHOUT_CUDA();
  ModelSpec spec;
  spec.feature_dim = 3;
  spec.context = 0;
  spec.layers = {LayerSpec::Dense(2, Activation::kRelu)};
  spec.num_classes = 2;
  auto dnn = CreateCudaBackend(spec, 4);
  ASSERT_TRUE(dnn.ok()) << dnn.status();
  std::vector<float> params(ModelParamCount(spec)), grad(params.size());
  std::vector<float> x(2 * 3);
  const std::vector<int32_t> two = {0, 1};
  auto code = [](const auto& result) { return result.status().code(); };
  constexpr auto kInvalid = absl::StatusCode::kInvalidArgument;
  // Label out of range, negative label.
  EXPECT_EQ(
      code(Grad(**dnn, params, x, {0, 2}, absl::MakeSpan(grad))),
      kInvalid);
  EXPECT_EQ(
      code(Grad(**dnn, params, x, {-1, 0}, absl::MakeSpan(grad))),
      kInvalid);
  // Inputs for 2 rows, labels for 1.
  EXPECT_EQ(code(Grad(**dnn, params, x, {0}, absl::MakeSpan(grad))),
            kInvalid);
  // More rows than max_batch, and no rows.
  std::vector<int32_t> five(5, 0);
  std::vector<float> x5(5 * 3);
  EXPECT_EQ(
      code(Grad(**dnn, params, x5, five, absl::MakeSpan(grad))),
      kInvalid);
  EXPECT_EQ(code(Grad(**dnn, params, {}, {}, absl::MakeSpan(grad))),
            kInvalid);
  // Wrong parameter and gradient sizes.
  std::vector<float> short_params(params.size() - 1);
  EXPECT_EQ(
      code(Grad(**dnn, short_params, x, two, absl::MakeSpan(grad))),
      kInvalid);
  std::vector<float> long_grad(params.size() + 1);
  EXPECT_EQ(
      code(Grad(**dnn, params, x, two, absl::MakeSpan(long_grad))),
      kInvalid);
  // Predict: sizes.
  std::vector<int32_t> out(3);
  EXPECT_EQ(Pred(**dnn, params, x, absl::MakeSpan(out)).code(), kInvalid);
  EXPECT_EQ(
      Pred(**dnn, short_params, x, absl::MakeSpan(out).first(2)).code(),
      kInvalid);
  // And it still works afterwards.
  EXPECT_TRUE(
      Grad(**dnn, params, x, two, absl::MakeSpan(grad)).ok());
  EXPECT_TRUE(Pred(**dnn, params, x, absl::MakeSpan(out).first(2)).ok());
}

// Runs on every machine.
TEST(CudaDnnTest, ReportsWhetherADeviceIsPresent) {
  ModelSpec spec;
  auto dnn = CreateCudaBackend(spec, 8);
  auto name = CudaDeviceName(0);
  if (CudaDeviceAvailable()) {
    EXPECT_TRUE(CudaDeviceStatus().ok());
    ASSERT_TRUE(dnn.ok()) << dnn.status();
    EXPECT_EQ((*dnn)->name(), "cuda");
    ASSERT_TRUE(name.ok()) << name.status();
    EXPECT_FALSE(name->empty());
    CudaOptions options;
    options.device = 1 << 20;
    EXPECT_EQ(CreateCudaBackend(spec, 8, options).status().code(),
              absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(CudaDeviceName(-1).status().code(),
              absl::StatusCode::kInvalidArgument);
  } else {
    EXPECT_EQ(CudaDeviceStatus().code(), absl::StatusCode::kUnavailable);
    EXPECT_EQ(dnn.status().code(), absl::StatusCode::kUnavailable);
    EXPECT_THAT(dnn.status().message(), HasSubstr("no CUDA device"));
    EXPECT_THAT(dnn.status().message(), HasSubstr("cudaGetDeviceCount"));
    EXPECT_EQ(name.status().code(), absl::StatusCode::kUnavailable);
  }
}

// Runs on every machine: argument checks come before the device lookup.
TEST(CudaDnnTest, BadSpecOrBatchIsInvalidArgument) {
  ModelSpec spec;
  spec.layers = {LayerSpec::Dense(16, Activation::kRelu),
                 LayerSpec::Dense(0, Activation::kRelu)};
  EXPECT_EQ(CreateCudaBackend(spec, 8).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CreateCudaBackend(ModelSpec(), 0).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(CudaDnnTest, ParsesMathModes) {
  EXPECT_EQ(*ParseCudaMathMode("fp32"), MathMode::kFp32);
  EXPECT_EQ(*ParseCudaMathMode("tf32"), MathMode::kTf32);
  EXPECT_EQ(CudaMathModeName(MathMode::kFp32), "fp32");
  EXPECT_EQ(CudaMathModeName(MathMode::kTf32), "tf32");
  EXPECT_EQ(ParseCudaMathMode("fp16").status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace asgd
