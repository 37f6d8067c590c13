// The dense layer: forward against a plain loop, backward by finite
// differences for every activation, and the output layer's affine part.
#include "model/layers/dense.h"

#include <cmath>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "model/layers/gradient_check.h"
#include "model/layers/layer.h"

namespace asgd {
namespace {

ModelSpec TinyDense(Activation act) {
  ModelSpec spec;
  spec.feature_dim = 3;
  spec.context = 1;  // 9 inputs
  spec.layers = {LayerSpec::Dense(7, act), LayerSpec::Dense(5, act)};
  spec.num_classes = 4;
  return spec;
}

TEST(DenseLayerTest, ForwardMatchesAPlainLoop) {
  for (Activation act : {Activation::kNone, Activation::kRelu,
                         Activation::kSigmoid, Activation::kTanh}) {
    const ModelSpec spec = TinyDense(act);
    auto layer = CreateLayer(spec, 0, 6);
    ASSERT_TRUE(layer.ok()) << layer.status();
    std::vector<float> params = InitialParams(spec, 3);
    const int in = 9, out = 7, rows = 6;
    std::mt19937_64 rng(1);
    std::uniform_real_distribution<float> u(-1, 1);
    for (int k = 0; k < out; ++k) params[int64_t{out} * in + k] = u(rng);
    std::vector<float> x(rows * in), y(rows * out);
    for (float& v : x) v = u(rng);
    (*layer)->Forward(params.data(), x.data(), 2, 3, y.data());
    for (int r = 0; r < rows; ++r) {
      for (int k = 0; k < out; ++k) {
        double z = params[int64_t{out} * in + k];
        for (int j = 0; j < in; ++j) z += double{params[k * in + j]} * x[r * in + j];
        double want = z;
        if (act == Activation::kRelu) want = std::max(z, 0.0);
        if (act == Activation::kSigmoid) want = 1 / (1 + std::exp(-z));
        if (act == Activation::kTanh) want = std::tanh(z);
        EXPECT_NEAR(y[r * out + k], want, 1e-5) << ActivationName(act);
      }
    }
  }
}

TEST(DenseLayerTest, BackwardMatchesFiniteDifferences) {
  for (Activation act :
       {Activation::kNone, Activation::kSigmoid, Activation::kTanh}) {
    const ModelSpec spec = TinyDense(act);
    for (int layer = 0; layer <= 2; ++layer) {
      GradientCheckReport r =
          CheckLayerGradients(spec, layer, 3, 2, GradientCheckOptions{});
      EXPECT_GT(r.checked, 20);
      EXPECT_EQ(r.failures, 0) << ActivationName(act) << " layer " << layer
                               << ": " << r.first_failure;
    }
  }
}

// relu is not differentiable at 0: allow the odd element whose
// pre-activation lies within the finite-difference step of the kink.
TEST(DenseLayerTest, ReluBackwardMatchesFiniteDifferencesAwayFromTheKink) {
  const ModelSpec spec = TinyDense(Activation::kRelu);
  GradientCheckOptions options;
  options.step = 1e-3;
  options.atol = 5e-3;
  GradientCheckReport r = CheckLayerGradients(spec, 1, 4, 1, options);
  EXPECT_GT(r.checked, 40);
  EXPECT_LE(r.failures, r.checked / 50) << r.first_failure;
}

TEST(DenseLayerTest, BadArgumentsAreInvalidArgument) {
  const ModelSpec spec = TinyDense(Activation::kRelu);
  EXPECT_EQ(CreateLayer(spec, 3, 4).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CreateLayer(spec, -1, 4).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CreateLayer(spec, 0, 0).status().code(),
            absl::StatusCode::kInvalidArgument);
  ModelSpec bad = spec;
  bad.layers[0].dense.units = 0;
  EXPECT_EQ(CreateLayer(bad, 0, 4).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace asgd
