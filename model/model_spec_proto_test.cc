// ModelSpec through its proto and text forms, the model config file, and
// the named model kinds.
#include "model/model_spec_proto.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "model/model_presets.h"

namespace asgd {
namespace {

using ::testing::HasSubstr;

TEST(ModelSpecProtoTest, EveryPresetRoundTripsThroughProtoAndText) {
  for (const char* kind : {"dnn", "cnn", "lstm", "blstm"}) {
    ModelShapeOptions o;
    o.kind = kind;
    o.lstm_projection = 64;
    o.cell_clip = 30;
    auto spec = PresetModel(o);
    ASSERT_TRUE(spec.ok()) << kind << ": " << spec.status();
    auto back = ModelSpecFromProto(ModelSpecToProto(*spec));
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ(ModelTensors(*back).size(), ModelTensors(*spec).size());
    EXPECT_EQ(ModelSpecToText(*back), ModelSpecToText(*spec)) << kind;
    auto parsed = ParseModelConfig(ModelSpecToText(*spec));
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    EXPECT_EQ(ModelSpecDigest(*parsed), ModelSpecDigest(*spec));
  }
}

TEST(ModelSpecProtoTest, OutputFramesRoundTripAndOneKeepsTheOldDigest) {
  ModelShapeOptions o;
  auto one = PresetModel(o);
  ASSERT_TRUE(one.ok()) << one.status();
  // A one-frame model writes no output_frames: its digest (and so every
  // checkpoint's fingerprint) is that of earlier versions.
  EXPECT_EQ(ModelSpecToProto(*one).output_frames(), 0u);
  EXPECT_THAT(ModelSpecToText(*one), ::testing::Not(HasSubstr("output")));
  o.output_frames = 3;
  auto three = PresetModel(o);
  ASSERT_TRUE(three.ok()) << three.status();
  EXPECT_NE(ModelSpecDigest(*three), ModelSpecDigest(*one));
  auto back = ParseModelConfig(ModelSpecToText(*three));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->output_frames, 3);
  EXPECT_EQ(ModelSpecDigest(*back), ModelSpecDigest(*three));
  EXPECT_THAT(ParseModelConfig("feature_dim: 4 num_classes: 4 "
                               "output_frames: 17 "
                               "layers { dense { units: 8 } }")
                  .status()
                  .message(),
              HasSubstr("output_frames"));
  o.kind = "lstm";
  EXPECT_EQ(PresetModel(o).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(ModelSpecProtoTest, PresetsHaveTheDocumentedShapes) {
  ModelShapeOptions o;
  auto dnn = PresetModel(o);
  ASSERT_TRUE(dnn.ok());
  EXPECT_EQ(DescribeModel(*dnn),
            "dense(512,relu) dense(512,relu) softmax(40) on 11x40 inputs");
  o.kind = "blstm";
  o.lstm_layers = 3;
  o.hidden = "128";
  auto blstm = PresetModel(o);
  ASSERT_TRUE(blstm.ok());
  EXPECT_EQ(DescribeModel(*blstm),
            "blstm(256) blstm(256) blstm(256) dense(128,relu) softmax(40) on "
            "1x40 inputs");
  o.kind = "transformer";
  EXPECT_THAT(PresetModel(o).status().message(),
              HasSubstr("unknown model kind 'transformer'"));
}

TEST(ModelSpecProtoTest, ConfigFileTextWithDefaults) {
  auto spec = ParseModelConfig(R"(
    feature_dim: 40 context: 3 num_classes: 30
    layers { conv { filters: 16 pool_freq: 2 } }
    layers { dense { units: 64 activation: TANH } }
  )");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->layers[0].conv.kernel_time, 3);   // default
  EXPECT_EQ(spec->layers[0].conv.kernel_freq, 8);   // default
  EXPECT_EQ(spec->layers[0].conv.pool_freq, 2);
  EXPECT_EQ(spec->layers[1].dense.activation, Activation::kTanh);
}

TEST(ModelSpecProtoTest, TheExampleConfigFilesParse) {
  auto cnn = ReadModelConfig("model/configs/cnn_wide.txt");
  ASSERT_TRUE(cnn.ok()) << cnn.status();
  EXPECT_EQ(DescribeModel(*cnn),
            "conv(64,3x8,pool 1x3,relu) conv(64,3x4,pool 1x1,relu) "
            "dense(1024,tanh) softmax(40) on 11x40 inputs");
  auto blstm = ReadModelConfig("model/configs/blstm_projected.txt");
  ASSERT_TRUE(blstm.ok()) << blstm.status();
  EXPECT_EQ(DescribeModel(*blstm),
            "blstm(320,proj 128,clip 50) blstm(320,proj 128,clip 50) "
            "softmax(40) on 1x40 inputs");
}

TEST(ModelSpecProtoTest, BadConfigsSayWhatAndWhere) {
  EXPECT_THAT(ParseModelConfig("feature_dim: 40\nlayers { dense { unitz: 3 } }")
                  .status()
                  .message(),
              HasSubstr("line 2"));
  EXPECT_THAT(ParseModelConfig("feature_dim: 40 num_classes: 10 layers { }")
                  .status()
                  .message(),
              HasSubstr("layer 0: no kind"));
  EXPECT_THAT(ParseModelConfig("feature_dim: 40 num_classes: 10 "
                               "layers { dense { units: 3 activation: 9 } }")
                  .status()
                  .message(),
              HasSubstr("unknown activation"));
  EXPECT_EQ(ParseModelConfig("feature_dim: 4000000000").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseModelConfig(std::string(2 << 20, ' ')).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ReadModelConfig("/nonexistent/model.txt").status().code(),
            absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace asgd
