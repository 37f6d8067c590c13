// CreateLayer: every layer kind is built, with the shapes model_spec.h
// gives, and runs forward and backward on a batch to finite values; bad
// arguments are InvalidArgument.
#include <cmath>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "model/layers/layer.h"
#include "model/model_spec.h"

namespace asgd {
namespace {

ModelSpec Cnn() {
  ModelSpec spec;
  spec.feature_dim = 10;
  spec.context = 2;
  ConvLayerSpec c1;
  c1.filters = 3;
  c1.kernel_time = 2;
  c1.kernel_freq = 3;
  c1.pool_freq = 2;
  ConvLayerSpec c2 = c1;
  c2.filters = 4;
  c2.kernel_freq = 2;
  c2.pool_freq = 1;
  c2.activation = Activation::kTanh;
  spec.layers = {LayerSpec::Conv(c1), LayerSpec::Conv(c2),
                 LayerSpec::Dense(6, Activation::kSigmoid)};
  spec.num_classes = 5;
  return spec;
}

ModelSpec Rnn() {
  ModelSpec spec;
  spec.feature_dim = 6;
  spec.context = 0;
  LstmLayerSpec l1;
  l1.cells = 5;
  l1.projection = 3;
  l1.cell_clip = 2.0f;
  l1.bidirectional = true;
  LstmLayerSpec l2;
  l2.cells = 4;
  spec.layers = {LayerSpec::Lstm(l1), LayerSpec::Lstm(l2),
                 LayerSpec::Dense(7, Activation::kRelu)};
  spec.num_classes = 3;
  return spec;
}

TEST(LayerFactoryTest, BuildsEveryLayerKindWithTheSpecsShapes) {
  for (const ModelSpec& spec : {Cnn(), Rnn()}) {
    const int sequences = 2, steps = spec.is_sequence() ? 3 : 1;
    const int rows = sequences * steps;
    const std::vector<float> all = InitialParams(spec, 1);
    std::mt19937_64 rng(2);
    std::uniform_real_distribution<float> u(-1, 1);
    for (int i = 0; i <= static_cast<int>(spec.layers.size()); ++i) {
      auto layer = CreateLayer(spec, i, rows);
      ASSERT_TRUE(layer.ok()) << DescribeModel(spec) << " layer " << i << ": "
                              << layer.status();
      Layer& l = **layer;
      // Conv layers read and write feature maps; the others flat rows.
      const bool conv = i < static_cast<int>(spec.layers.size()) &&
                        spec.layers[i].kind == LayerKind::kConv;
      if (conv) {
        EXPECT_EQ(l.in_shape(), LayerInputShape(spec, i)) << i;
        EXPECT_EQ(l.out_shape(), LayerOutputShape(spec, i)) << i;
      }
      EXPECT_EQ(l.in_shape().dim(), LayerInputShape(spec, i).dim()) << i;
      EXPECT_EQ(l.out_shape().dim(), LayerOutputShape(spec, i).dim()) << i;
      // A batch through it: finite outputs and gradients, all written.
      const float* params = all.data() + LayerParamOffset(spec, i);
      std::vector<float> in(int64_t{rows} * l.in_shape().dim());
      for (float& x : in) x = u(rng);
      std::vector<float> out(int64_t{rows} * l.out_shape().dim(), NAN);
      std::vector<float> dout(out.size(), 0.25f);
      std::vector<float> dparams(LayerParamCount(spec, i), NAN);
      std::vector<float> din(in.size(), NAN);
      l.Forward(params, in.data(), sequences, steps, out.data());
      l.Backward(params, in.data(), out.data(), dout.data(), sequences, steps,
                 dparams.data(), din.data());
      for (float v : out) ASSERT_TRUE(std::isfinite(v)) << i;
      for (float v : dparams) ASSERT_TRUE(std::isfinite(v)) << i;
      for (float v : din) ASSERT_TRUE(std::isfinite(v)) << i;
    }
  }
}

TEST(LayerFactoryTest, BadArgumentsAreInvalidArgument) {
  const auto kBad = absl::StatusCode::kInvalidArgument;
  for (const ModelSpec& spec : {Cnn(), Rnn()}) {
    EXPECT_EQ(CreateLayer(spec, -1, 4).status().code(), kBad);
    EXPECT_EQ(CreateLayer(spec, 4, 4).status().code(), kBad);
    EXPECT_EQ(CreateLayer(spec, 0, 0).status().code(), kBad);
  }
  ModelSpec cnn = Cnn();
  cnn.layers[1].conv.kernel_time = 9;  // longer than its input
  EXPECT_EQ(CreateLayer(cnn, 0, 4).status().code(), kBad);
  ModelSpec rnn = Rnn();
  rnn.layers[0].lstm.cell_clip = -1;
  EXPECT_EQ(CreateLayer(rnn, 1, 4).status().code(), kBad);
}

}  // namespace
}  // namespace asgd
