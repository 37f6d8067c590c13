// A model cut into LayerRanges, run forward from the first and backward from
// the last (a pipeline with no delay), computes the CPU backend's loss and
// gradient bit for bit, for DNN, CNN, LSTM and BLSTM models and every way
// of cutting them; bad ranges are refused.
#include "model/layer_range.h"

#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "model/backend.h"
#include "model/cpu_backend.h"
#include "model/cpu_layer_range.h"

namespace asgd {
namespace {

ModelSpec Spec(const std::string& kind) {
  ModelSpec spec;
  spec.feature_dim = 6;
  spec.num_classes = 5;
  if (kind == "lstm" || kind == "blstm") {
    spec.context = 0;
    LstmLayerSpec l;
    l.cells = 7;
    l.projection = kind == "lstm" ? 4 : 0;
    l.bidirectional = kind == "blstm";
    spec.layers = {LayerSpec::Lstm(l), LayerSpec::Lstm(l),
                   LayerSpec::Dense(8, Activation::kRelu)};
  } else if (kind == "cnn") {
    spec.context = 2;
    ConvLayerSpec c;
    c.filters = 3;
    c.kernel_time = 2;
    c.kernel_freq = 3;
    c.pool_time = 1;
    c.pool_freq = 2;
    spec.layers = {LayerSpec::Conv(c), LayerSpec::Dense(9, Activation::kRelu),
                   LayerSpec::Dense(7, Activation::kSigmoid)};
  } else {
    spec.context = 1;
    spec.layers = {LayerSpec::Dense(9, Activation::kRelu),
                   LayerSpec::Dense(8, Activation::kTanh),
                   LayerSpec::Dense(7, Activation::kRelu)};
  }
  return spec;
}

// Every way of cutting layers [0, n) into contiguous ranges: the cut points.
std::vector<std::vector<int>> Cuts(int n) {
  std::vector<std::vector<int>> all;
  for (int mask = 0; mask < (1 << (n - 1)); ++mask) {
    std::vector<int> bounds = {0};
    for (int i = 1; i < n; ++i) {
      if (mask & (1 << (i - 1))) bounds.push_back(i);
    }
    bounds.push_back(n);
    all.push_back(bounds);
  }
  return all;
}

class LayerRangeTest : public ::testing::TestWithParam<std::string> {};

TEST_P(LayerRangeTest, EveryCutEqualsTheBackendBitForBit) {
  const ModelSpec spec = Spec(GetParam());
  const bool recurrent = GetParam() == "lstm" || GetParam() == "blstm";
  const int sequences = recurrent ? 3 : 12, steps = recurrent ? 4 : 1;
  const int rows = sequences * steps;
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0, 1);
  std::vector<float> inputs(int64_t{rows} * spec.input_dim());
  for (float& x : inputs) x = normal(rng);
  std::vector<int32_t> labels(rows);
  for (int i = 0; i < rows; ++i) labels[i] = i % 4 == 3 ? kNoLabel : i % 5;
  Batch batch{sequences, steps, inputs, labels};
  const std::vector<float> params = InitialParams(spec, 3);

  auto backend = CreateCpuBackend(spec, rows);
  ASSERT_TRUE(backend.ok());
  std::vector<float> want(params.size());
  auto expected = (*backend)->ComputeGradient(params, batch,
                                              absl::MakeSpan(want));
  ASSERT_TRUE(expected.ok());

  const int n = static_cast<int>(spec.layers.size()) + 1;
  for (const std::vector<int>& bounds : Cuts(n)) {
    SCOPED_TRACE(::testing::PrintToString(bounds));
    std::vector<std::unique_ptr<LayerRange>> stages;
    for (size_t s = 0; s + 1 < bounds.size(); ++s) {
      auto stage = CreateCpuLayerRange(spec, bounds[s], bounds[s + 1], rows);
      ASSERT_TRUE(stage.ok()) << stage.status();
      stages.push_back(*std::move(stage));
    }
    ASSERT_TRUE(stages.back()->has_loss());
    // Forward, each stage on the previous one's output.
    std::vector<const float*> ins;
    for (size_t s = 0; s < stages.size(); ++s) {
      const float* in = s == 0 ? inputs.data() : stages[s - 1]->out();
      ins.push_back(in);
      ASSERT_TRUE(stages[s]
                      ->Forward(params.data() + stages[s]->param_offset(), in,
                                sequences, steps)
                      .ok());
    }
    const BatchResult got = stages.back()->Loss(batch);
    EXPECT_EQ(got.loss, expected->loss);
    EXPECT_EQ(got.correct, expected->correct);
    EXPECT_EQ(got.labelled, expected->labelled);
    // Backward, each stage from the next one's input gradient.
    std::vector<float> grad(params.size(), -1.0f);
    std::vector<float> dout;
    for (int s = static_cast<int>(stages.size()) - 1; s >= 0; --s) {
      LayerRange& stage = *stages[s];
      std::vector<float> din(s == 0 ? 0 : int64_t{rows} * stage.in_dim());
      ASSERT_TRUE(stage
                      .Backward(params.data() + stage.param_offset(), ins[s],
                                stage.has_loss() ? nullptr : dout.data(),
                                sequences, steps,
                                grad.data() + stage.param_offset(),
                                s == 0 ? nullptr : din.data())
                      .ok());
      dout = std::move(din);
    }
    ASSERT_EQ(grad, want);
  }
}

INSTANTIATE_TEST_SUITE_P(Kinds, LayerRangeTest,
                         ::testing::Values("dnn", "cnn", "lstm", "blstm"));

TEST(LayerRangeTest, ShapesOffsetsAndRefusals) {
  const ModelSpec spec = Spec("dnn");
  auto middle = CreateCpuLayerRange(spec, 1, 3, 4);
  ASSERT_TRUE(middle.ok());
  EXPECT_FALSE((*middle)->has_loss());
  EXPECT_EQ((*middle)->in_dim(), 9);
  EXPECT_EQ((*middle)->out_dim(), 7);
  EXPECT_EQ((*middle)->param_offset(), LayerParamOffset(spec, 1));
  EXPECT_EQ((*middle)->param_count(),
            LayerParamCount(spec, 1) + LayerParamCount(spec, 2));
  auto last = CreateCpuLayerRange(spec, 3, 4, 4);
  ASSERT_TRUE(last.ok());
  EXPECT_TRUE((*last)->has_loss());
  EXPECT_EQ((*last)->out_dim(), 5);
  for (auto [first, end] : {std::pair{2, 2}, std::pair{-1, 1}, std::pair{0, 5},
                            std::pair{3, 1}}) {
    EXPECT_EQ(CreateCpuLayerRange(spec, first, end, 4).status().code(),
              absl::StatusCode::kInvalidArgument)
        << first << " " << end;
  }
  EXPECT_EQ(CreateCpuLayerRange(spec, 0, 1, 0).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace asgd
