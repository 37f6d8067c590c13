// The ONNX export of every model kind passes the ONNX checker and keeps
// asgd's tensors under their names, byte for byte; an LSTM is a Scan whose
// step clips the cell and projects when the spec says so. (The exported
// models run in onnxruntime against asgd's own forward pass in
// tests/onnx_runtime_test.sh.)
#include "model/onnx_export.h"

#include <cstring>
#include <map>
#include <set>
#include <string>

#include "gtest/gtest.h"
#include "onnx/onnx_pb.h"

namespace asgd {
namespace {

ModelSpec Dnn() {
  ModelSpec s;
  s.feature_dim = 5;
  s.context = 2;
  s.num_classes = 7;
  s.layers = {LayerSpec::Dense(6, Activation::kRelu),
              LayerSpec::Dense(4, Activation::kTanh)};
  return s;
}

ModelSpec Cnn() {
  ModelSpec s = Dnn();
  s.feature_dim = 12;
  ConvLayerSpec a;
  a.filters = 3;
  a.kernel_time = 2;
  a.kernel_freq = 3;
  a.pool_freq = 2;
  ConvLayerSpec b;
  b.filters = 2;
  b.kernel_time = 2;
  b.kernel_freq = 2;
  b.pool_freq = 1;
  b.activation = Activation::kSigmoid;
  s.layers = {LayerSpec::Conv(a), LayerSpec::Conv(b),
              LayerSpec::Dense(5, Activation::kRelu)};
  return s;
}

ModelSpec Lstm(bool bidirectional) {
  ModelSpec s = Dnn();
  s.context = 0;
  LstmLayerSpec l;
  l.cells = 6;
  l.projection = 3;
  l.cell_clip = 0.5f;
  l.bidirectional = bidirectional;
  LstmLayerSpec plain;
  plain.cells = 4;
  plain.bidirectional = bidirectional;
  s.layers = {LayerSpec::Lstm(l), LayerSpec::Lstm(plain)};
  return s;
}

std::set<std::string> OpsOf(const onnx::GraphProto& g) {
  std::set<std::string> ops;
  for (const auto& n : g.node()) ops.insert(n.op_type());
  return ops;
}

TEST(OnnxExportTest, EveryKindPassesTheCheckerAndKeepsItsTensors) {
  for (const ModelSpec& spec : {Dnn(), Cnn(), Lstm(false), Lstm(true)}) {
    const std::vector<float> params = InitialParams(spec, 3);
    auto bytes = ExportOnnx(spec, params);
    ASSERT_TRUE(bytes.ok()) << bytes.status();
    ASSERT_TRUE(CheckOnnx(*bytes).ok()) << CheckOnnx(*bytes) << "\n"
                                        << DescribeModel(spec);
    onnx::ModelProto model;
    ASSERT_TRUE(model.ParseFromString(*bytes));
    EXPECT_EQ(model.graph().input(0).name(), kOnnxInputName);
    EXPECT_EQ(model.graph().output(0).name(), kOnnxOutputName);
    std::map<std::string, const onnx::TensorProto*> init;
    for (const auto& t : model.graph().initializer()) init[t.name()] = &t;
    // Every asgd tensor, with its values in order.
    int64_t offset = 0;
    for (const TensorSpec& t : ModelTensors(spec)) {
      ASSERT_EQ(init.count(t.name), 1u) << t.name;
      const onnx::TensorProto& tensor = *init[t.name];
      EXPECT_EQ(std::vector<int64_t>(tensor.dims().begin(), tensor.dims().end()),
                t.shape)
          << t.name;
      int64_t size = 1;
      for (int64_t d : t.shape) size *= d;
      const std::string& raw = tensor.raw_data();
      ASSERT_EQ(raw.size(), size * sizeof(float)) << t.name;
      EXPECT_EQ(std::memcmp(raw.data(), params.data() + offset, raw.size()), 0)
          << t.name;
      offset += size;
    }
    EXPECT_EQ(offset, static_cast<int64_t>(params.size()));
    const std::set<std::string> ops = OpsOf(model.graph());
    EXPECT_EQ(ops.count("LogSoftmax"), 1u);
    if (spec.is_sequence()) {
      int scans = 0;
      for (const auto& n : model.graph().node()) {
        if (n.op_type() != "Scan") continue;
        ++scans;
        for (const auto& a : n.attribute()) {
          if (a.name() == "body") {
            EXPECT_EQ(OpsOf(a.g()).count("Split"), 1u);
          }
        }
      }
      const int directions = spec.layers[0].lstm.bidirectional ? 2 : 1;
      EXPECT_EQ(scans, 2 * directions);
    }
    if (spec.layers[0].kind == LayerKind::kConv) {
      EXPECT_EQ(ops.count("Conv"), 1u);
      EXPECT_EQ(ops.count("MaxPool"), 1u);  // the second conv has no pooling
    }
  }
}

// The step of a clipped, projected LSTM clips and projects; the plain one
// does neither; the backward direction reads and writes in reverse.
TEST(OnnxExportTest, LstmStepsClipProjectAndRunBackward) {
  const ModelSpec spec = Lstm(true);
  auto bytes = ExportOnnx(spec, InitialParams(spec, 1));
  ASSERT_TRUE(bytes.ok());
  onnx::ModelProto model;
  ASSERT_TRUE(model.ParseFromString(*bytes));
  std::vector<const onnx::NodeProto*> scans;
  for (const auto& n : model.graph().node()) {
    if (n.op_type() == "Scan") scans.push_back(&n);
  }
  ASSERT_EQ(scans.size(), 4u);  // layer 0 fw, bw; layer 1 fw, bw
  for (size_t k = 0; k < scans.size(); ++k) {
    const onnx::NodeProto& scan = *scans[k];
    const onnx::GraphProto* body = nullptr;
    std::vector<int64_t> in_dirs, out_dirs;
    for (const auto& a : scan.attribute()) {
      if (a.name() == "body") body = &a.g();
      if (a.name() == "scan_input_directions") in_dirs.assign(a.ints().begin(), a.ints().end());
      if (a.name() == "scan_output_directions") out_dirs.assign(a.ints().begin(), a.ints().end());
    }
    ASSERT_NE(body, nullptr);
    const std::set<std::string> ops = OpsOf(*body);
    const bool first_layer = k < 2;
    EXPECT_EQ(ops.count("Clip"), first_layer ? 1u : 0u) << k;
    int gemms = 0;
    for (const auto& n : body->node()) gemms += n.op_type() == "Gemm";
    EXPECT_EQ(gemms, first_layer ? 2 : 1) << k;  // recurrent (+ projection)
    const bool backward = k % 2 == 1;
    EXPECT_EQ(in_dirs, backward ? std::vector<int64_t>{1} : std::vector<int64_t>{});
    EXPECT_EQ(out_dirs, backward ? std::vector<int64_t>{1} : std::vector<int64_t>{});
  }
}

TEST(OnnxExportTest, RefusesParametersOfAnotherModel) {
  EXPECT_EQ(ExportOnnx(Dnn(), std::vector<float>(3)).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CheckOnnx("not a model").code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace asgd
