// ModelSpec: shapes, tensors, parameter offsets, initial values and the
// validation of every layer kind.
#include "model/model_spec.h"

#include <cmath>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace asgd {
namespace {

using ::testing::HasSubstr;

ModelSpec Dnn() {
  ModelSpec spec;
  spec.layers = {LayerSpec::Dense(512, Activation::kRelu),
                 LayerSpec::Dense(256, Activation::kRelu)};
  return spec;
}

ModelSpec Cnn() {
  ModelSpec spec;  // 11 x 40 inputs
  ConvLayerSpec c1;
  c1.filters = 8;
  c1.kernel_time = 3;
  c1.kernel_freq = 8;
  c1.pool_freq = 3;  // 9 x 33 -> 9 x 11
  ConvLayerSpec c2;
  c2.filters = 4;
  c2.kernel_time = 3;
  c2.kernel_freq = 4;
  c2.pool_time = 2;
  c2.pool_freq = 2;  // 7 x 8 -> 3 x 4
  spec.layers = {LayerSpec::Conv(c1), LayerSpec::Conv(c2),
                 LayerSpec::Dense(64, Activation::kRelu)};
  return spec;
}

ModelSpec Blstm() {
  ModelSpec spec;
  spec.context = 0;
  LstmLayerSpec l;
  l.cells = 16;
  l.projection = 8;
  l.cell_clip = 50;
  l.bidirectional = true;
  spec.layers = {LayerSpec::Lstm(l), LayerSpec::Lstm(l)};
  return spec;
}

TEST(ModelSpecTest, DnnTensorsKeepTheirNames) {
  const ModelSpec spec = Dnn();
  ASSERT_TRUE(ValidateModelSpec(spec).ok());
  const std::vector<TensorSpec> t = ModelTensors(spec);
  ASSERT_EQ(t.size(), 6u);
  EXPECT_EQ(t[0].name, "layer0/weight");
  EXPECT_EQ(t[0].shape, (std::vector<int64_t>{512, 440}));
  EXPECT_EQ(t[5].name, "layer2/bias");
  EXPECT_EQ(t[5].shape, (std::vector<int64_t>{40}));
  EXPECT_EQ(ModelParamCount(spec),
            512 * 441 + 256 * 513 + 40 * 257);
  EXPECT_FALSE(spec.is_sequence());
}

TEST(ModelSpecTest, ConvShapesAndTensors) {
  const ModelSpec spec = Cnn();
  ASSERT_TRUE(ValidateModelSpec(spec).ok()) << ValidateModelSpec(spec);
  EXPECT_EQ(LayerOutputShape(spec, 0), (FeatureShape{8, 9, 11}));
  EXPECT_EQ(LayerOutputShape(spec, 1), (FeatureShape{4, 3, 4}));
  EXPECT_EQ(LayerInputShape(spec, 2).dim(), 48);
  const std::vector<TensorSpec> t = ModelTensors(spec);
  EXPECT_EQ(t[0].name, "layer0/filter");
  EXPECT_EQ(t[0].shape, (std::vector<int64_t>{8, 1, 3, 8}));
  EXPECT_EQ(t[2].shape, (std::vector<int64_t>{4, 8, 3, 4}));
  EXPECT_EQ(t[4].shape, (std::vector<int64_t>{64, 48}));
}

TEST(ModelSpecTest, BidirectionalProjectedLstmTensors) {
  const ModelSpec spec = Blstm();
  ASSERT_TRUE(ValidateModelSpec(spec).ok());
  EXPECT_TRUE(spec.is_sequence());
  EXPECT_EQ(LayerOutputShape(spec, 0).dim(), 16);  // 2 x projection
  const std::vector<TensorSpec> t = LayerTensors(spec, 1);
  ASSERT_EQ(t.size(), 8u);
  EXPECT_EQ(t[0].name, "fw/w_x");
  EXPECT_EQ(t[0].shape, (std::vector<int64_t>{64, 16}));
  EXPECT_EQ(t[1].shape, (std::vector<int64_t>{64, 8}));
  EXPECT_EQ(t[3].name, "fw/w_p");
  EXPECT_EQ(t[3].shape, (std::vector<int64_t>{8, 16}));
  EXPECT_EQ(t[4].name, "bw/w_x");
  EXPECT_EQ(ModelTensors(spec)[4].name, "layer0/bw/w_x");
}

TEST(ModelSpecTest, OffsetsAddUp) {
  for (const ModelSpec& spec : {Dnn(), Cnn(), Blstm()}) {
    int64_t sum = 0;
    for (int i = 0; i <= static_cast<int>(spec.layers.size()); ++i) {
      EXPECT_EQ(LayerParamOffset(spec, i), sum);
      sum += LayerParamCount(spec, i);
    }
    EXPECT_EQ(sum, ModelParamCount(spec));
    EXPECT_EQ(static_cast<int64_t>(InitialParams(spec, 1).size()), sum);
  }
}

TEST(ModelSpecTest, InitialParamsAreDeterministicBoundedAndSetTheForgetBias) {
  const ModelSpec spec = Blstm();
  const std::vector<float> a = InitialParams(spec, 5);
  EXPECT_EQ(a, InitialParams(spec, 5));
  EXPECT_NE(a, InitialParams(spec, 6));
  for (float v : a) EXPECT_TRUE(std::isfinite(v) && std::abs(v) <= 1.0f);
  // layer0/fw/bias follows w_x [64, 40] and w_r [64, 8].
  const int64_t bias = 64 * 40 + 64 * 8;
  for (int k = 0; k < 16; ++k) EXPECT_EQ(a[bias + k], 0.0f);        // i
  for (int k = 16; k < 32; ++k) EXPECT_EQ(a[bias + k], 1.0f);       // f
  for (int k = 32; k < 64; ++k) EXPECT_EQ(a[bias + k], 0.0f);       // g, o
}

TEST(ModelSpecTest, ValidationNamesTheLayerAndTheProblem) {
  ModelSpec late_conv = Cnn();
  std::swap(late_conv.layers[1], late_conv.layers[2]);
  EXPECT_THAT(ValidateModelSpec(late_conv).message(),
              HasSubstr("layer 2 (conv): conv layers must come before"));

  ModelSpec big_kernel = Cnn();
  big_kernel.layers[0].conv.kernel_time = 12;
  EXPECT_THAT(ValidateModelSpec(big_kernel).message(),
              HasSubstr("larger than its input"));

  ModelSpec pooled_away = Cnn();
  pooled_away.layers[1].conv.pool_freq = 9;
  EXPECT_THAT(ValidateModelSpec(pooled_away).message(),
              HasSubstr("leaves nothing"));

  ModelSpec conv_lstm = Cnn();
  conv_lstm.layers[2] = Blstm().layers[0];
  EXPECT_THAT(ValidateModelSpec(conv_lstm).message(),
              HasSubstr("frame model"));

  ModelSpec bad_clip = Blstm();
  bad_clip.layers[1].lstm.cell_clip = -1;
  EXPECT_THAT(ValidateModelSpec(bad_clip).message(), HasSubstr("cell_clip"));

  ModelSpec huge = Dnn();
  huge.layers = std::vector<LayerSpec>(
      40, LayerSpec::Dense(60000, Activation::kRelu));
  EXPECT_THAT(ValidateModelSpec(huge).message(), HasSubstr("parameters"));

  ModelSpec one_class = Dnn();
  one_class.num_classes = 1;
  EXPECT_EQ(ValidateModelSpec(one_class).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(ModelSpecTest, AMultiFrameModelHasOneOutputLayerForItsHeads) {
  ModelSpec spec = Dnn();
  const std::vector<TensorSpec> one = ModelTensors(spec);
  spec.output_frames = 3;
  ASSERT_TRUE(ValidateModelSpec(spec).ok());
  EXPECT_EQ(spec.output_dim(), 3 * spec.num_classes);
  const std::vector<TensorSpec> three = ModelTensors(spec);
  ASSERT_EQ(three.size(), one.size());
  // Hidden layers unchanged; the output layer's rows are the heads'.
  for (size_t i = 0; i + 2 < one.size(); ++i) {
    EXPECT_EQ(three[i].name, one[i].name);
    EXPECT_EQ(three[i].shape, one[i].shape);
  }
  const TensorSpec& weight = three[three.size() - 2];
  EXPECT_EQ(weight.name, one[one.size() - 2].name);
  EXPECT_EQ(weight.shape,
            (std::vector<int64_t>{3 * spec.num_classes,
                                  one[one.size() - 2].shape[1]}));
  EXPECT_EQ(three.back().shape, (std::vector<int64_t>{3 * spec.num_classes}));
  EXPECT_EQ(LayerOutputShape(spec, static_cast<int>(spec.layers.size())).dim(),
            3 * spec.num_classes);
  EXPECT_THAT(DescribeModel(spec), HasSubstr("3xsoftmax(40)"));

  for (int bad : {0, -1, kMaxOutputFrames + 1}) {
    spec.output_frames = bad;
    EXPECT_THAT(ValidateModelSpec(spec).message(), HasSubstr("output_frames"))
        << bad;
  }
  ModelSpec lstm = Blstm();
  lstm.output_frames = 2;
  EXPECT_THAT(ValidateModelSpec(lstm).message(), HasSubstr("frame model"));
  ModelSpec cnn = Cnn();
  cnn.output_frames = kMaxOutputFrames;
  EXPECT_TRUE(ValidateModelSpec(cnn).ok());
}

TEST(ModelSpecTest, Describe) {
  EXPECT_EQ(DescribeModel(Cnn()),
            "conv(8,3x8,pool 1x3,relu) conv(4,3x4,pool 2x2,relu) "
            "dense(64,relu) softmax(40) on 11x40 inputs");
  EXPECT_EQ(DescribeModel(Blstm()),
            "blstm(16,proj 8,clip 50) blstm(16,proj 8,clip 50) softmax(40) "
            "on 1x40 inputs");
}

TEST(ModelSpecTest, ParsesNamesAndSizes) {
  EXPECT_EQ(*ParseActivation("tanh"), Activation::kTanh);
  EXPECT_FALSE(ParseActivation("gelu").ok());
  EXPECT_EQ(*ParseLayerSizes("512, 256"), (std::vector<int>{512, 256}));
  EXPECT_TRUE(ParseLayerSizes("")->empty());
  EXPECT_FALSE(ParseLayerSizes("512,-1").ok());
}

}  // namespace
}  // namespace asgd
