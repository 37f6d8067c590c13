// The CUDA backend against the CPU backend (model/cpu_backend.h, whose layers
// model/layers/*_test.cc check by finite differences): dense models here,
// conv models in cuda_conv_test.cc, LSTMs in cuda_lstm_test.cc; plus what
// every model kind shares (unlabelled batches, repeatability) and the
// backend's error paths.
//
// With a CUDA device, for each DNN (no hidden layer; widths that are no
// multiple of 32; more classes than a block has threads; the seed model's
// 440-512-512-40), relu and sigmoid, fp32 and tf32 GEMMs, batches of 256, 1
// and 7 rows on one instance: the loss, the labelled and correct counts,
// every gradient tensor, every log-posterior and every prediction
// (backend_compare.h; tolerances in ToleranceFor: per gradient tensor
// max |gpu - cpu| <= 1e-4 (fp32) or 2e-2 (tf32) times max |cpu|). A quarter
// of the rows are unlabelled. ReLU inputs are drawn at least 1e-4 (fp32) or
// 2e-3 (tf32) clear of 0, so that rounding cannot flip a unit.
//
// Without a device the comparisons skip and the tests of the argument checks
// that come before the device lookup run.
#include "model/cuda/cuda_backend.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <ostream>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "model/backend.h"
#include "model/cpu_backend.h"
#include "model/cuda/backend_compare.h"
#include "model/cuda/cuda_test_util.h"

namespace asgd {

// Readable test parameters in gtest's messages (found by argument-dependent
// lookup, so in namespace asgd itself).
void PrintTo(Activation act, std::ostream* os) { *os << ActivationName(act); }
void PrintTo(CudaOptions::MathMode math, std::ostream* os) {
  *os << CudaMathModeName(math);
}

namespace {

using MathMode = CudaOptions::MathMode;
using ::testing::HasSubstr;

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

// The DNN of `shape`: one frame of input_dim features, no context.
ModelSpec SpecFor(const Shape& shape, Activation act) {
  ModelSpec spec;
  spec.feature_dim = shape.input_dim;
  spec.context = 0;
  for (int h : shape.hidden) spec.layers.push_back(LayerSpec::Dense(h, act));
  spec.num_classes = shape.num_classes;
  return spec;
}

CudaOptions Options(MathMode math) {
  CudaOptions options;
  options.math = math;
  return options;
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

TEST_P(CudaDnnMatchesCpuTest, GradientLossAccuracyLogPosteriorsAndPredict) {
  SKIP_WITHOUT_CUDA();
  const auto [shape_index, act, math] = GetParam();
  const ModelSpec spec = SpecFor(ShapeAt(shape_index), act);
  ExpectCudaMatchesCpu(spec, Options(math), {{256, 1}, {1, 1}, {7, 1}},
                       math == MathMode::kFp32 ? 1e-4 : 2e-3, 17 + shape_index,
                       ParamName(GetParam()));
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

// One model of each kind, with its batch shape.
struct KindCase {
  const char* name;
  ModelSpec spec;
  BatchShape shape;
};

std::vector<KindCase> EveryKind() {
  return {{"dnn", SpecFor(ShapeAt(1), Activation::kRelu), {9, 1}},
          {"cnn", CompareCnn(Activation::kRelu), {9, 1}},
          {"lstm", CompareLstm(), {3, 4}},
          {"blstm", CompareBlstm(), {2, 5}}};
}

// A CUDA backend for c, parameters, and a batch of c's shape with a fraction
// `unlabelled` of its rows unlabelled.
struct KindRun {
  std::unique_ptr<ModelBackend> gpu;
  std::vector<float> params;
  CompareBatch batch;
};
void StartKind(const KindCase& c, double unlabelled, uint32_t seed,
               KindRun* run) {
  auto gpu = CreateCudaBackend(c.spec, 64);
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  run->gpu = std::move(*gpu);
  run->params = CompareParams(c.spec, seed);
  auto batch = MakeCompareBatch(c.spec, run->params, c.shape.sequences,
                                c.shape.steps, 0.0, unlabelled, seed + 1);
  ASSERT_TRUE(batch.ok()) << batch.status();
  run->batch = std::move(*batch);
}

// A batch without a labelled row trains nothing: the gradient is exactly 0,
// and so are the loss and the counts; predictions still come out.
TEST(CudaBackendTest, UnlabelledBatchesHaveZeroGradientInEveryModel) {
  SKIP_WITHOUT_CUDA();
  for (const KindCase& c : EveryKind()) {
    SCOPED_TRACE(c.name);
    KindRun run;
    StartKind(c, 1.0, 21, &run);
    if (HasFatalFailure()) return;
    std::vector<float> grad(run.params.size(), 1.0f);
    auto r = run.gpu->ComputeGradient(run.params, run.batch.batch(),
                                      absl::MakeSpan(grad));
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->labelled, 0);
    EXPECT_EQ(r->correct, 0);
    EXPECT_EQ(r->loss, 0.0);
    EXPECT_EQ(grad, std::vector<float>(run.params.size(), 0.0f));
    std::vector<int32_t> predicted(run.batch.rows(), -1);
    ASSERT_TRUE(
        run.gpu
            ->Predict(run.params, run.batch.batch(), absl::MakeSpan(predicted))
            .ok());
    for (int32_t p : predicted) {
      EXPECT_GE(p, 0);
      EXPECT_LT(p, c.spec.num_classes);
    }
  }
}

// Teacher-student batches (soft targets, loss_impl.h): the CUDA backend's
// gradient and loss against the CPU backend's on the same taught batch, for
// every model kind, with unlabelled rows among them.
TEST(CudaBackendTest, TaughtBatchesMatchTheCpuBackendInEveryModel) {
  SKIP_WITHOUT_CUDA();
  CudaOptions options;
  options.math = MathMode::kFp32;
  for (const KindCase& c : EveryKind()) {
    SCOPED_TRACE(c.name);
    KindRun run;
    StartKind(c, 0.25, 31, &run);
    if (HasFatalFailure()) return;
    auto gpu = CreateCudaBackend(c.spec, 64, options);
    auto cpu = CreateCpuBackend(c.spec, 64);
    ASSERT_TRUE(gpu.ok() && cpu.ok());
    // The teacher: log-posteriors of the CPU backend's model with its
    // parameters scaled, so that it disagrees with the student.
    std::vector<float> teacher_params = run.params;
    for (float& v : teacher_params) v *= 1.5f;
    std::vector<float> teacher(int64_t{run.batch.rows()} * c.spec.num_classes);
    ASSERT_TRUE((*cpu)
                    ->LogPosteriors(teacher_params, run.batch.batch(),
                                    absl::MakeSpan(teacher))
                    .ok());
    Batch taught = run.batch.batch();
    taught.teacher = teacher;
    taught.teacher_weight = 0.6f;
    taught.temperature = 2.0f;
    std::vector<float> want(run.params.size()), got(run.params.size());
    auto a = (*cpu)->ComputeGradient(run.params, taught, absl::MakeSpan(want));
    auto b = (*gpu)->ComputeGradient(run.params, taught, absl::MakeSpan(got));
    ASSERT_TRUE(a.ok()) << a.status();
    ASSERT_TRUE(b.ok()) << b.status();
    EXPECT_EQ(a->labelled, b->labelled);
    EXPECT_EQ(a->correct, b->correct);
    EXPECT_NEAR(a->loss, b->loss, 1e-4 * std::max(1.0, a->loss));
    float scale = 0, worst = 0;
    for (size_t i = 0; i < want.size(); ++i) {
      scale = std::max(scale, std::fabs(want[i]));
      worst = std::max(worst, std::fabs(want[i] - got[i]));
    }
    ASSERT_GT(scale, 0.0f);
    EXPECT_LE(worst, 1e-4f * scale) << "largest |gradient| " << scale;
    // The soft targets changed the gradient: it is not the labels' alone.
    std::vector<float> hard(run.params.size());
    ASSERT_TRUE((*gpu)
                    ->ComputeGradient(run.params, run.batch.batch(),
                                      absl::MakeSpan(hard))
                    .ok());
    EXPECT_NE(hard, got);
  }
}

// A multi-frame model (output_frames heads of num_classes per row): the
// CUDA backend's gradient, loss, log-posteriors and predictions against the
// CPU backend's, on plain and on taught batches.
TEST(CudaBackendTest, MultiFrameHeadsMatchTheCpuBackend) {
  SKIP_WITHOUT_CUDA();
  ModelSpec spec = SpecFor(ShapeAt(1), Activation::kRelu);
  spec.output_frames = 3;
  const int rows = 17, k = spec.output_frames, c = spec.num_classes;
  CudaOptions options;
  options.math = MathMode::kFp32;
  auto gpu = CreateCudaBackend(spec, rows, options);
  auto cpu = CreateCpuBackend(spec, rows);
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  const std::vector<float> params = CompareParams(spec, 41);
  std::mt19937 rng(42);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> inputs(int64_t{rows} * spec.input_dim());
  for (float& v : inputs) v = normal(rng);
  std::vector<int32_t> labels(rows * k);
  for (size_t i = 0; i < labels.size(); ++i) {
    labels[i] = i % 5 == 2 ? kNoLabel : static_cast<int32_t>(rng() % c);
  }
  Batch batch{rows, 1, inputs, labels};

  std::vector<float> want_post(rows * k * c), got_post(rows * k * c);
  ASSERT_TRUE(
      (*cpu)->LogPosteriors(params, batch, absl::MakeSpan(want_post)).ok());
  ASSERT_TRUE(
      (*gpu)->LogPosteriors(params, batch, absl::MakeSpan(got_post)).ok());
  float worst = 0;
  for (size_t i = 0; i < want_post.size(); ++i) {
    worst = std::max(worst, std::fabs(want_post[i] - got_post[i]));
  }
  EXPECT_LE(worst, 1e-4f);
  std::vector<int32_t> want_pred(rows * k), got_pred(rows * k);
  ASSERT_TRUE((*cpu)->Predict(params, batch, absl::MakeSpan(want_pred)).ok());
  ASSERT_TRUE((*gpu)->Predict(params, batch, absl::MakeSpan(got_pred)).ok());
  int differ = 0;
  for (size_t i = 0; i < want_pred.size(); ++i)
    differ += want_pred[i] != got_pred[i];
  EXPECT_LE(differ, 1) << "of " << want_pred.size() << " heads";

  Batch taught = batch;
  std::vector<float> teacher = want_post;
  for (float& v : teacher) v *= 0.5f;  // a flatter, unnormalised teacher
  taught.teacher = teacher;
  taught.teacher_weight = 0.4f;
  taught.temperature = 1.5f;
  for (const Batch& b : {batch, taught}) {
    std::vector<float> want(params.size()), got(params.size());
    auto x = (*cpu)->ComputeGradient(params, b, absl::MakeSpan(want));
    auto y = (*gpu)->ComputeGradient(params, b, absl::MakeSpan(got));
    ASSERT_TRUE(x.ok()) << x.status();
    ASSERT_TRUE(y.ok()) << y.status();
    EXPECT_EQ(x->labelled, y->labelled);
    EXPECT_NEAR(x->correct, y->correct, 1);
    EXPECT_NEAR(x->loss, y->loss, 1e-4 * std::max(1.0, x->loss));
    float scale = 0, err = 0;
    for (size_t i = 0; i < want.size(); ++i) {
      scale = std::max(scale, std::fabs(want[i]));
      err = std::max(err, std::fabs(want[i] - got[i]));
    }
    EXPECT_LE(err, 1e-4f * scale) << (b.teacher.empty() ? "plain" : "taught");
  }
}

TEST(CudaBackendTest, RepeatedCallsAreBitwiseIdenticalInEveryModel) {
  SKIP_WITHOUT_CUDA();
  for (const KindCase& c : EveryKind()) {
    SCOPED_TRACE(c.name);
    KindRun run;
    StartKind(c, 0.25, 3, &run);
    if (HasFatalFailure()) return;
    std::vector<float> first(run.params.size()), second(run.params.size());
    auto a = run.gpu->ComputeGradient(run.params, run.batch.batch(),
                                      absl::MakeSpan(first));
    auto b = run.gpu->ComputeGradient(run.params, run.batch.batch(),
                                      absl::MakeSpan(second));
    ASSERT_TRUE(a.ok() && b.ok());
    EXPECT_EQ(a->loss, b->loss);
    EXPECT_EQ(a->correct, b->correct);
    EXPECT_EQ(first, second);
  }
}

// Exactly equal logits: the argmax is the first of them, as in the CPU
// backend (std::max_element), also when the tied classes fall to different
// threads of the row's block (1001 classes, 256 threads).
TEST(CudaBackendTest, ArgmaxTiesGoToTheFirstClass) {
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
      auto gpu = CreateCudaBackend(spec, 2, Options(math));
      ASSERT_TRUE(gpu.ok()) << gpu.status();
      std::vector<int32_t> predicted(2, -1);
      ASSERT_TRUE(
          (*gpu)
              ->Predict(params, Batch{2, 1, x, {}}, absl::MakeSpan(predicted))
              .ok());
      EXPECT_EQ(predicted, std::vector<int32_t>({want, want}));
      std::vector<float> grad(params.size());
      const std::vector<int32_t> labels = {want, 1};
      auto r = (*gpu)->ComputeGradient(params, Batch{2, 1, x, labels},
                                       absl::MakeSpan(grad));
      ASSERT_TRUE(r.ok()) << r.status();
      EXPECT_EQ(r->correct, 1);
    }
  }
}

TEST(CudaBackendTest, RejectsBadInputLikeTheCpuBackend) {
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
  auto grad_of = [&](absl::Span<const float> p, absl::Span<const float> in,
                     std::vector<int32_t> labels, absl::Span<float> g,
                     int steps = 1) {
    const int rows = static_cast<int>(labels.size());
    return (*dnn)
        ->ComputeGradient(p, Batch{rows / steps, steps, in, labels}, g)
        .status()
        .code();
  };
  constexpr auto kInvalid = absl::StatusCode::kInvalidArgument;
  // Label out of range, a negative label other than kNoLabel.
  EXPECT_EQ(grad_of(params, x, {0, 2}, absl::MakeSpan(grad)), kInvalid);
  EXPECT_EQ(grad_of(params, x, {-2, 0}, absl::MakeSpan(grad)), kInvalid);
  // Inputs for 2 rows, labels for 1.
  EXPECT_EQ(grad_of(params, x, {0}, absl::MakeSpan(grad)), kInvalid);
  // Steps for a frame model.
  EXPECT_EQ(grad_of(params, x, {0, 1}, absl::MakeSpan(grad), 2), kInvalid);
  // More rows than max_batch, and no rows.
  std::vector<float> x5(5 * 3);
  EXPECT_EQ(
      grad_of(params, x5, std::vector<int32_t>(5, 0), absl::MakeSpan(grad)),
      kInvalid);
  EXPECT_EQ(grad_of(params, {}, {}, absl::MakeSpan(grad)), kInvalid);
  // Wrong parameter and gradient sizes.
  std::vector<float> short_params(params.size() - 1);
  EXPECT_EQ(grad_of(short_params, x, {0, 1}, absl::MakeSpan(grad)), kInvalid);
  std::vector<float> long_grad(params.size() + 1);
  EXPECT_EQ(grad_of(params, x, {0, 1}, absl::MakeSpan(long_grad)), kInvalid);
  // Predict and LogPosteriors: sizes.
  std::vector<int32_t> out(3);
  EXPECT_EQ(
      (*dnn)->Predict(params, Batch{2, 1, x, {}}, absl::MakeSpan(out)).code(),
      kInvalid);
  std::vector<float> logp(2 * 2 + 1);
  EXPECT_EQ(
      (*dnn)
          ->LogPosteriors(params, Batch{2, 1, x, {}}, absl::MakeSpan(logp))
          .code(),
      kInvalid);
  // And it still works afterwards, kNoLabel rows included.
  EXPECT_EQ(grad_of(params, x, {kNoLabel, 1}, absl::MakeSpan(grad)),
            absl::StatusCode::kOk);
  EXPECT_TRUE(
      (*dnn)
          ->Predict(params, Batch{2, 1, x, {}}, absl::MakeSpan(out).first(2))
          .ok());
}

// Runs on every machine.
TEST(CudaBackendTest, ReportsWhetherADeviceIsPresent) {
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
TEST(CudaBackendTest, BadSpecBatchOrOptionsIsInvalidArgument) {
  ModelSpec spec;
  spec.layers = {LayerSpec::Dense(16, Activation::kRelu),
                 LayerSpec::Dense(0, Activation::kRelu)};
  EXPECT_EQ(CreateCudaBackend(spec, 8).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CreateCudaBackend(ModelSpec(), 0).status().code(),
            absl::StatusCode::kInvalidArgument);
  CudaOptions options;
  options.conv_block_rows = -1;
  EXPECT_EQ(CreateCudaBackend(CompareCnn(Activation::kRelu), 8, options)
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
  options = CudaOptions();
  options.conv_dw_slice_rows = -1;
  EXPECT_EQ(CreateCudaBackend(CompareCnn(Activation::kRelu), 8, options)
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(CudaBackendTest, ParsesMathModes) {
  EXPECT_EQ(*ParseCudaMathMode("fp32"), MathMode::kFp32);
  EXPECT_EQ(*ParseCudaMathMode("tf32"), MathMode::kTf32);
  EXPECT_EQ(CudaMathModeName(MathMode::kFp32), "fp32");
  EXPECT_EQ(CudaMathModeName(MathMode::kTf32), "tf32");
  EXPECT_EQ(ParseCudaMathMode("fp16").status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace asgd
