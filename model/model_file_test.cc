// The model file: round trips of every model kind, the earlier DNN format,
// and malformed files refused with InvalidArgument.
#include "model/model_file.h"

#include <cmath>
#include <cstdio>
#include <fstream>
#include <iterator>

#include "gtest/gtest.h"
#include "model/model_spec_proto.h"

namespace asgd {
namespace {

std::string TempPath(const std::string& name) {
  return std::string(getenv("TEST_TMPDIR") ? getenv("TEST_TMPDIR") : "/tmp") +
         "/" + name;
}

ModelSpec SmallBlstm() {
  ModelSpec spec;
  spec.feature_dim = 6;
  spec.context = 0;
  LstmLayerSpec l;
  l.cells = 4;
  l.projection = 3;
  l.cell_clip = 20;
  l.bidirectional = true;
  spec.layers = {LayerSpec::Lstm(l), LayerSpec::Dense(5, Activation::kTanh)};
  spec.num_classes = 7;
  return spec;
}

ModelSpec SmallCnn() {
  ModelSpec spec;
  spec.feature_dim = 10;
  spec.context = 2;
  ConvLayerSpec c;
  c.filters = 3;
  c.kernel_time = 2;
  c.kernel_freq = 4;
  c.pool_freq = 2;
  c.activation = Activation::kSigmoid;
  spec.layers = {LayerSpec::Conv(c), LayerSpec::Dense(4, Activation::kRelu)};
  spec.num_classes = 5;
  return spec;
}

TEST(ModelFileTest, RoundTripsEveryKind) {
  for (const ModelSpec& spec : {SmallBlstm(), SmallCnn()}) {
    const std::vector<float> params = InitialParams(spec, 3);
    const std::string path = TempPath("model.asgd");
    ASSERT_TRUE(SaveModel(path, spec, params).ok());
    auto loaded = LoadModel(path);
    ASSERT_TRUE(loaded.ok()) << loaded.status();
    EXPECT_EQ(loaded->params, params);
    EXPECT_EQ(ModelSpecToText(loaded->spec), ModelSpecToText(spec));
  }
}

TEST(ModelFileTest, RoundTripsPrunedTensors) {
  const ModelSpec spec = SmallCnn();
  std::vector<float> params = InitialParams(spec, 3);
  params[1] = 0.0f;
  const std::string path = TempPath("pruned.asgd");
  const std::vector<std::string> pruned = {"layer1/weight", "layer0/filter"};
  ASSERT_TRUE(SaveModel(path, spec, params, pruned).ok());
  auto loaded = LoadModel(path);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->pruned, pruned);
  EXPECT_EQ(loaded->params, params);
  // A dense model names none.
  ASSERT_TRUE(SaveModel(path, spec, params).ok());
  loaded = LoadModel(path);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_TRUE(loaded->pruned.empty());

  const auto kBad = absl::StatusCode::kInvalidArgument;
  EXPECT_EQ(SaveModel(path, spec, params, {std::string("layer9/weight")}).code(),
            kBad);
  EXPECT_EQ(SaveModel(path, spec, params,
                      {std::string("layer1/weight"), std::string("layer1/weight")})
                .code(),
            kBad);
  // The same refusals when reading.
  ASSERT_TRUE(SaveModel(path, spec, params, {std::string("layer1/weight")}).ok());
  std::string bytes;
  {
    std::ifstream in(path, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  for (const char* line : {"pruned layer1/weight\n", "pruned layer7/weight\n",
                           "pruned\n"}) {
    std::string bad = bytes;
    bad.insert(bad.find("data "), line);
    std::ofstream(path, std::ios::binary | std::ios::trunc) << bad;
    EXPECT_EQ(LoadModel(path).status().code(), kBad) << line;
  }
}

TEST(ModelFileTest, ReadsTheEarlierDnnFormat) {
  const std::string path = TempPath("v1.asgd");
  {
    std::ofstream out(path, std::ios::binary);
    out << "asgd-model 1\nactivation sigmoid\ntensor layer0/weight 3 22\n"
           "tensor layer0/bias 3\ntensor layer1/weight 4 3\n"
           "tensor layer1/bias 4\ndata 85\n";
    std::vector<float> data(85, 0.25f);
    out.write(reinterpret_cast<const char*>(data.data()), 85 * 4);
  }
  auto loaded = LoadModel(path);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->spec.context, 5);
  EXPECT_EQ(loaded->spec.feature_dim, 2);
  ASSERT_EQ(loaded->spec.layers.size(), 1u);
  EXPECT_EQ(loaded->spec.layers[0].dense.units, 3);
  EXPECT_EQ(loaded->spec.layers[0].dense.activation, Activation::kSigmoid);
  EXPECT_EQ(loaded->spec.num_classes, 4);
}

TEST(ModelFileTest, RejectsBadFiles) {
  EXPECT_EQ(LoadModel(TempPath("missing")).status().code(),
            absl::StatusCode::kNotFound);
  const ModelSpec spec = SmallCnn();
  const std::string path = TempPath("model2.asgd");
  std::vector<float> params = InitialParams(spec, 3);
  ASSERT_TRUE(SaveModel(path, spec, params).ok());
  std::string bytes;
  {
    std::ifstream in(path, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  auto write = [&](const std::string& content) {
    std::ofstream(path, std::ios::binary | std::ios::trunc) << content;
    return LoadModel(path).status().code();
  };
  const auto kBad = absl::StatusCode::kInvalidArgument;
  EXPECT_EQ(write(bytes.substr(0, bytes.size() - 3)), kBad);  // truncated
  EXPECT_EQ(write(bytes + "x"), kBad);
  EXPECT_EQ(write("hello\n"), kBad);
  EXPECT_EQ(write(std::string(3 << 20, 'a')), kBad);  // no newline at all
  std::string wrong = bytes;
  wrong.replace(wrong.find("tensor layer1/bias 4"), 20, "tensor layer1/bias 5");
  EXPECT_EQ(write(wrong), kBad);
  std::string bad_spec = bytes;
  bad_spec.replace(bad_spec.find("filters: 3"), 10, "filters: 0");
  EXPECT_EQ(write(bad_spec), kBad);
  std::string nan = bytes;
  const float not_finite = NAN;
  nan.replace(nan.size() - 4, 4, reinterpret_cast<const char*>(&not_finite), 4);
  EXPECT_EQ(write(nan), kBad);

  params[2] = INFINITY;
  EXPECT_EQ(SaveModel(path, spec, params).code(), kBad);
  params.pop_back();
  EXPECT_EQ(SaveModel(path, spec, params).code(), kBad);
}

}  // namespace
}  // namespace asgd
