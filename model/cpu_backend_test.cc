// The CPU backend as a whole: the gradient of the mean cross-entropy by
// finite differences, unlabelled rows, log-posteriors against Predict, and
// the argument checks.
#include "model/cpu_backend.h"

#include <cmath>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "model/loss_gradient_check.h"

namespace asgd {
namespace {

ModelSpec Tiny() {
  ModelSpec spec;
  spec.feature_dim = 4;
  spec.context = 1;  // 12 inputs
  spec.layers = {LayerSpec::Dense(9, Activation::kTanh),
                 LayerSpec::Dense(6, Activation::kSigmoid)};
  spec.num_classes = 5;
  return spec;
}

struct Data {
  std::vector<float> inputs;
  std::vector<int32_t> labels;
};

Data RandomData(const ModelSpec& spec, int rows, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(-1, 1);
  Data d;
  d.inputs.resize(int64_t{rows} * spec.input_dim());
  for (float& x : d.inputs) x = u(rng);
  for (int i = 0; i < rows; ++i) d.labels.push_back(i % spec.num_classes);
  return d;
}

TEST(CpuBackendTest, GradientOfTheMeanLossMatchesFiniteDifferences) {
  const ModelSpec spec = Tiny();
  auto backend = CreateCpuBackend(spec, 8);
  ASSERT_TRUE(backend.ok()) << backend.status();
  const std::vector<float> params = InitialParams(spec, 2);
  Data d = RandomData(spec, 8, 3);
  d.labels[2] = kNoLabel;  // unlabelled rows take no part
  d.labels[5] = kNoLabel;
  const Batch batch{8, 1, d.inputs, d.labels};
  std::vector<float> grad(params.size());
  auto r = (*backend)->ComputeGradient(params, batch, absl::MakeSpan(grad));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->labelled, 6);
  LossGradientOptions o;
  o.atol = 1e-3;
  o.stride = 3;
  const LossGradientReport check =
      CheckLossGradient(**backend, params, batch, grad, o);
  EXPECT_EQ(check.failures, 0) << check.first_failure;
}

TEST(CpuBackendTest, UnlabelledRowsChangeNothing) {
  const ModelSpec spec = Tiny();
  auto backend = CreateCpuBackend(spec, 8);
  ASSERT_TRUE(backend.ok());
  const std::vector<float> params = InitialParams(spec, 2);
  Data d = RandomData(spec, 4, 3);
  std::vector<float> g4(params.size()), g8(params.size());
  auto r4 = (*backend)->ComputeGradient(params, Batch{4, 1, d.inputs, d.labels},
                                        absl::MakeSpan(g4));
  // The same 4 rows and 4 unlabelled ones with other inputs.
  Data more = RandomData(spec, 8, 9);
  std::copy(d.inputs.begin(), d.inputs.end(), more.inputs.begin());
  for (int i = 0; i < 8; ++i) more.labels[i] = i < 4 ? d.labels[i] : kNoLabel;
  auto r8 = (*backend)->ComputeGradient(
      params, Batch{8, 1, more.inputs, more.labels}, absl::MakeSpan(g8));
  ASSERT_TRUE(r4.ok() && r8.ok());
  EXPECT_NEAR(r4->loss, r8->loss, 1e-6);
  EXPECT_EQ(r4->correct, r8->correct);
  for (size_t j = 0; j < g4.size(); ++j) ASSERT_NEAR(g4[j], g8[j], 1e-6) << j;

  // No labelled row at all: zero gradient, zero loss.
  std::vector<int32_t> none(8, kNoLabel);
  auto r0 = (*backend)->ComputeGradient(params, Batch{8, 1, more.inputs, none},
                                        absl::MakeSpan(g8));
  ASSERT_TRUE(r0.ok());
  EXPECT_EQ(r0->labelled, 0);
  EXPECT_EQ(r0->loss, 0);
  for (float g : g8) ASSERT_EQ(g, 0.0f);
}

TEST(CpuBackendTest, LogPosteriorsAreNormalisedAndAgreeWithPredict) {
  const ModelSpec spec = Tiny();
  auto backend = CreateCpuBackend(spec, 8);
  ASSERT_TRUE(backend.ok());
  const std::vector<float> params = InitialParams(spec, 4);
  Data d = RandomData(spec, 8, 5);
  const Batch batch{8, 1, d.inputs, d.labels};
  std::vector<float> logp(8 * 5);
  std::vector<int32_t> argmax(8);
  ASSERT_TRUE((*backend)->LogPosteriors(params, batch, absl::MakeSpan(logp)).ok());
  ASSERT_TRUE((*backend)->Predict(params, batch, absl::MakeSpan(argmax)).ok());
  for (int i = 0; i < 8; ++i) {
    double sum = 0;
    int best = 0;
    for (int k = 0; k < 5; ++k) {
      sum += std::exp(logp[i * 5 + k]);
      if (logp[i * 5 + k] > logp[i * 5 + best]) best = k;
    }
    EXPECT_NEAR(sum, 1.0, 1e-5);
    EXPECT_EQ(argmax[i], best);
  }
}

TEST(CpuBackendTest, BadBatchesAreInvalidArgument) {
  const ModelSpec spec = Tiny();
  auto backend = CreateCpuBackend(spec, 8);
  ASSERT_TRUE(backend.ok());
  const std::vector<float> params = InitialParams(spec, 4);
  Data d = RandomData(spec, 8, 5);
  std::vector<float> grad(params.size());
  auto code = [&](std::vector<float> p, Batch batch) {
    return (*backend)->ComputeGradient(p, batch, absl::MakeSpan(grad)).status().code();
  };
  const auto kBad = absl::StatusCode::kInvalidArgument;
  EXPECT_EQ(code(params, Batch{8, 1, d.inputs, d.labels}), absl::StatusCode::kOk);
  EXPECT_EQ(code({1.0f}, Batch{8, 1, d.inputs, d.labels}), kBad);
  EXPECT_EQ(code(params, Batch{4, 2, d.inputs, d.labels}), kBad);  // frame model
  EXPECT_EQ(code(params, Batch{9, 1, d.inputs, d.labels}), kBad);
  EXPECT_EQ(code(params, Batch{0, 1, {}, {}}), kBad);
  d.labels[3] = 5;
  EXPECT_EQ(code(params, Batch{8, 1, d.inputs, d.labels}), kBad);
  d.labels[3] = -2;
  EXPECT_EQ(code(params, Batch{8, 1, d.inputs, d.labels}), kBad);
  EXPECT_EQ(CreateCpuBackend(spec, 0).status().code(), kBad);
}

}  // namespace
}  // namespace asgd
