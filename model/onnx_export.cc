#include "model/onnx_export.h"

#include <cstdio>
#include <cstring>
#include <fstream>
#include <initializer_list>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "model/model_spec_proto.h"
#include "onnx/checker.h"
#include "onnx/onnx_pb.h"
#include "onnx/shape_inference/implementation.h"

namespace asgd {
namespace {

constexpr int kOpset = 17;
constexpr int kIrVersion = 8;

using onnx::AttributeProto;
using onnx::GraphProto;
using onnx::NodeProto;
using onnx::TensorProto;
using onnx::ValueInfoProto;

// Sets `info` to a float tensor of `dims` (a negative dim: the symbolic
// "frames").
void SetFloatType(ValueInfoProto* info, const std::string& name,
                  std::initializer_list<int64_t> dims) {
  info->set_name(name);
  auto* tensor = info->mutable_type()->mutable_tensor_type();
  tensor->set_elem_type(TensorProto::FLOAT);
  auto* shape = tensor->mutable_shape();
  for (int64_t d : dims) {
    if (d < 0) {
      shape->add_dim()->set_dim_param("frames");
    } else {
      shape->add_dim()->set_dim_value(d);
    }
  }
}

// Appends nodes and initializers to one graph, with fresh value names.
class GraphWriter {
 public:
  GraphWriter(GraphProto* graph, std::string prefix)
      : graph_(graph), prefix_(std::move(prefix)) {}

  std::string Fresh(const std::string& what) {
    return absl::StrCat(prefix_, what, "_", next_++);
  }

  // A float initializer named `name` holding `count` values from `data`.
  std::string Floats(const std::string& name, std::vector<int64_t> dims,
                     const float* data) {
    TensorProto* t = graph_->add_initializer();
    t->set_name(name);
    t->set_data_type(TensorProto::FLOAT);
    int64_t count = 1;
    for (int64_t d : dims) {
      t->add_dims(d);
      count *= d;
    }
    // raw_data is little-endian, as float is on every machine asgd runs on.
    t->set_raw_data(std::string(reinterpret_cast<const char*>(data),
                                count * sizeof(float)));
    return name;
  }
  std::string Zeros(const std::string& name, std::vector<int64_t> dims) {
    int64_t count = 1;
    for (int64_t d : dims) count *= d;
    const std::vector<float> zeros(count, 0.0f);
    return Floats(name, std::move(dims), zeros.data());
  }
  std::string Scalar(const std::string& name, float value) {
    return Floats(name, {}, &value);
  }
  std::string Int64s(const std::string& name, std::vector<int64_t> values) {
    TensorProto* t = graph_->add_initializer();
    t->set_name(name);
    t->set_data_type(TensorProto::INT64);
    t->add_dims(static_cast<int64_t>(values.size()));
    for (int64_t v : values) t->add_int64_data(v);
    return name;
  }

  // A node of `op` over `inputs`, with one fresh output (returned) unless
  // `outputs` names them.
  NodeProto* Add(const std::string& op, std::vector<std::string> inputs,
                 std::vector<std::string> outputs) {
    NodeProto* n = graph_->add_node();
    n->set_op_type(op);
    n->set_name(Fresh(op));
    for (const std::string& i : inputs) n->add_input(i);
    for (const std::string& o : outputs) n->add_output(o);
    return n;
  }
  std::string Apply(const std::string& op, std::vector<std::string> inputs) {
    const std::string out = Fresh(op);
    Add(op, std::move(inputs), {out});
    return out;
  }

 private:
  GraphProto* const graph_;
  const std::string prefix_;
  int next_ = 0;
};

void SetInt(NodeProto* n, const std::string& name, int64_t v) {
  AttributeProto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(AttributeProto::INT);
  a->set_i(v);
}

void SetInts(NodeProto* n, const std::string& name,
             std::initializer_list<int64_t> v) {
  AttributeProto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(AttributeProto::INTS);
  for (int64_t x : v) a->add_ints(x);
}

std::string Activate(GraphWriter* g, Activation act, const std::string& x) {
  switch (act) {
    case Activation::kRelu:
      return g->Apply("Relu", {x});
    case Activation::kSigmoid:
      return g->Apply("Sigmoid", {x});
    case Activation::kTanh:
      return g->Apply("Tanh", {x});
    case Activation::kNone:
      break;
  }
  return x;
}

// y = x W^T + b: Gemm with transB.
std::string Affine(GraphWriter* g, const std::string& x, const std::string& w,
                   const std::string& b) {
  const std::string y = g->Fresh("Gemm");
  NodeProto* n = g->Add("Gemm", {x, w, b}, {y});
  SetInt(n, "transB", 1);
  return y;
}

// One direction of an LSTM layer over the rows `x` [frames, in]; returns
// its output [frames, rec]. `names` is the tensors' name prefix
// ("layer1/" or "layer1/fw/"), `p` points at the direction's parameters.
std::string LstmDirection(GraphWriter* g, const std::string& x, int in,
                          const LstmLayerSpec& spec, bool backward,
                          const std::string& names, const float* p) {
  const int64_t cells = spec.cells, g4 = 4 * cells;
  const int64_t rec = spec.projection > 0 ? spec.projection : cells;
  const std::string w_x = g->Floats(names + "w_x", {g4, in}, p);
  p += g4 * in;
  const std::string w_r = g->Floats(names + "w_r", {g4, rec}, p);
  p += g4 * rec;
  const std::string bias = g->Floats(names + "bias", {g4}, p);
  p += g4;
  std::string w_p;
  if (spec.projection > 0) w_p = g->Floats(names + "w_p", {rec, cells}, p);

  // The input part of the gates for every step: [frames, 4*cells].
  const std::string xg = Affine(g, x, w_x, bias);
  const std::string r0 = g->Zeros(names + "r0", {1, rec});
  const std::string c0 = g->Zeros(names + "c0", {1, cells});
  const std::string split = g->Int64s(names + "gate_sizes",
                                      {cells, cells, cells, cells});
  std::string clip_lo, clip_hi;
  if (spec.cell_clip > 0) {
    clip_lo = g->Scalar(names + "clip_min", -spec.cell_clip);
    clip_hi = g->Scalar(names + "clip_max", spec.cell_clip);
  }

  // The body: one step. Weights are the outer graph's initializers.
  GraphProto body;
  body.set_name(names + (backward ? "backward_step" : "step"));
  SetFloatType(body.add_input(), "r_prev", {1, rec});
  SetFloatType(body.add_input(), "c_prev", {1, cells});
  SetFloatType(body.add_input(), "xg_t", {g4});
  GraphWriter s(&body, "");
  NodeProto* gemm = s.Add("Gemm", {"r_prev", w_r, "xg_t"}, {"gates"});
  SetInt(gemm, "transB", 1);
  NodeProto* cut = s.Add("Split", {"gates", split}, {"a_i", "a_f", "a_g", "a_o"});
  SetInt(cut, "axis", 1);
  const std::string i = s.Apply("Sigmoid", {"a_i"});
  const std::string f = s.Apply("Sigmoid", {"a_f"});
  const std::string u = s.Apply("Tanh", {"a_g"});
  const std::string o = s.Apply("Sigmoid", {"a_o"});
  std::string c = s.Apply(
      "Add", {s.Apply("Mul", {f, "c_prev"}), s.Apply("Mul", {i, u})});
  if (spec.cell_clip > 0) c = s.Apply("Clip", {c, clip_lo, clip_hi});
  std::string r = s.Apply("Mul", {o, s.Apply("Tanh", {c})});
  if (spec.projection > 0) {
    const std::string projected = s.Fresh("Gemm");
    NodeProto* n = s.Add("Gemm", {r, w_p}, {projected});
    SetInt(n, "transB", 1);
    r = projected;
  }
  s.Add("Identity", {r}, {"r_next"});
  s.Add("Identity", {c}, {"c_next"});
  s.Add("Identity", {r}, {"r_t"});
  SetFloatType(body.add_output(), "r_next", {1, rec});
  SetFloatType(body.add_output(), "c_next", {1, cells});
  SetFloatType(body.add_output(), "r_t", {1, rec});

  const std::string all = g->Fresh("Scan");
  NodeProto* scan = g->Add("Scan", {r0, c0, xg},
                           {g->Fresh("r_last"), g->Fresh("c_last"), all});
  SetInt(scan, "num_scan_inputs", 1);
  if (backward) {
    // Read the steps last to first and write the outputs in the same
    // reverse order, so that output t belongs to step t.
    SetInts(scan, "scan_input_directions", {1});
    SetInts(scan, "scan_output_directions", {1});
  }
  AttributeProto* a = scan->add_attribute();
  a->set_name("body");
  a->set_type(AttributeProto::GRAPH);
  *a->mutable_g() = std::move(body);
  // [frames, 1, rec] -> [frames, rec].
  const std::string shape = g->Int64s(names + "out_shape", {-1, rec});
  return g->Apply("Reshape", {all, shape});
}

absl::Status WriteBytes(const std::string& path, const std::string& bytes) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) {
      return absl::PermissionDeniedError(absl::StrCat("cannot write ", tmp));
    }
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    if (!out.flush()) {
      std::remove(tmp.c_str());
      return absl::DataLossError(absl::StrCat("write failed: ", tmp));
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    return absl::PermissionDeniedError(
        absl::StrCat("cannot rename ", tmp, " to ", path));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::string> ExportOnnx(const ModelSpec& spec,
                                       absl::Span<const float> params) {
  ASGD_RETURN_IF_ERROR(ValidateModelSpec(spec));
  if (static_cast<int64_t>(params.size()) != ModelParamCount(spec)) {
    return absl::InvalidArgumentError(
        absl::StrCat("ExportOnnx: ", params.size(), " parameters for a model of ",
                     ModelParamCount(spec)));
  }
  onnx::ModelProto model;
  model.set_ir_version(kIrVersion);
  model.set_producer_name("asgd");
  model.set_doc_string(absl::StrCat(
      DescribeModel(spec),
      ". Input: one utterance's rows, each the 2*context+1 frames around a "
      "frame stacked (edge frames repeated), features normalised as in "
      "training. Output: log-posteriors per row."));
  auto* opset = model.add_opset_import();
  opset->set_domain("");
  opset->set_version(kOpset);
  auto* meta = model.add_metadata_props();
  meta->set_key("asgd_model_spec");
  meta->set_value(ModelSpecToText(spec));

  GraphProto* graph = model.mutable_graph();
  graph->set_name("asgd");
  SetFloatType(graph->add_input(), kOnnxInputName, {-1, spec.input_dim()});
  GraphWriter g(graph, "");
  std::string x = kOnnxInputName;
  bool image = false;  // x is [frames, channels, time, freq]
  const int layers = static_cast<int>(spec.layers.size());
  for (int l = 0; l <= layers; ++l) {
    const float* p = params.data() + LayerParamOffset(spec, l);
    const std::string names = absl::StrCat("layer", l, "/");
    const int64_t in = LayerInputShape(spec, l).dim();
    if (l == layers) {  // the output layer
      if (image) x = g.Apply("Flatten", {x});
      const int64_t k = spec.output_dim();
      const std::string w = g.Floats(names + "weight", {k, in}, p);
      const std::string b = g.Floats(names + "bias", {k}, p + k * in);
      const std::string logits = Affine(&g, x, w, b);
      if (spec.output_frames == 1) {
        NodeProto* n = g.Add("LogSoftmax", {logits}, {kOnnxOutputName});
        SetInt(n, "axis", 1);
        break;
      }
      // A multi-frame model: a log-softmax per head of num_classes.
      const std::string heads = g.Apply(
          "Reshape", {logits, g.Int64s(names + "head_shape",
                                       {-1, spec.output_frames,
                                        spec.num_classes})});
      const std::string log_heads = g.Fresh("LogSoftmax");
      SetInt(g.Add("LogSoftmax", {heads}, {log_heads}), "axis", 2);
      g.Add("Reshape", {log_heads, g.Int64s(names + "out_shape", {-1, k})},
            {kOnnxOutputName});
      break;
    }
    const LayerSpec& layer = spec.layers[l];
    switch (layer.kind) {
      case LayerKind::kDense: {
        if (image) {
          x = g.Apply("Flatten", {x});
          image = false;
        }
        const int64_t units = layer.dense.units;
        const std::string w = g.Floats(names + "weight", {units, in}, p);
        const std::string b = g.Floats(names + "bias", {units}, p + units * in);
        x = Activate(&g, layer.dense.activation, Affine(&g, x, w, b));
        break;
      }
      case LayerKind::kConv: {
        const FeatureShape s = LayerInputShape(spec, l);
        if (!image) {
          const std::string shape =
              g.Int64s(names + "image_shape", {-1, s.channels, s.time, s.freq});
          x = g.Apply("Reshape", {x, shape});
          image = true;
        }
        const ConvLayerSpec& c = layer.conv;
        const int64_t filter_size =
            int64_t{c.filters} * s.channels * c.kernel_time * c.kernel_freq;
        const std::string w = g.Floats(
            names + "filter", {c.filters, s.channels, c.kernel_time, c.kernel_freq},
            p);
        const std::string b = g.Floats(names + "bias", {c.filters}, p + filter_size);
        const std::string y = g.Fresh("Conv");
        NodeProto* conv = g.Add("Conv", {x, w, b}, {y});
        SetInts(conv, "kernel_shape", {c.kernel_time, c.kernel_freq});
        SetInts(conv, "strides", {1, 1});
        x = Activate(&g, c.activation, y);
        if (c.pool_time > 1 || c.pool_freq > 1) {
          const std::string pooled = g.Fresh("MaxPool");
          NodeProto* pool = g.Add("MaxPool", {x}, {pooled});
          SetInts(pool, "kernel_shape", {c.pool_time, c.pool_freq});
          SetInts(pool, "strides", {c.pool_time, c.pool_freq});
          x = pooled;
        }
        break;
      }
      case LayerKind::kLstm: {
        const LstmLayerSpec& lstm = layer.lstm;
        if (!lstm.bidirectional) {
          x = LstmDirection(&g, x, static_cast<int>(in), lstm, false, names, p);
          break;
        }
        const int64_t per_direction = LayerParamCount(spec, l) / 2;
        const std::string fw = LstmDirection(&g, x, static_cast<int>(in), lstm,
                                             false, names + "fw/", p);
        const std::string bw = LstmDirection(&g, x, static_cast<int>(in), lstm,
                                             true, names + "bw/",
                                             p + per_direction);
        const std::string both = g.Fresh("Concat");
        NodeProto* n = g.Add("Concat", {fw, bw}, {both});
        SetInt(n, "axis", 1);
        x = both;
        break;
      }
    }
  }
  SetFloatType(graph->add_output(), kOnnxOutputName, {-1, spec.output_dim()});
  std::string bytes;
  if (!model.SerializeToString(&bytes)) {
    return absl::InternalError("ExportOnnx: the model does not serialize");
  }
  return bytes;
}

absl::Status CheckOnnx(const std::string& serialized) {
  onnx::ModelProto model;
  if (!model.ParseFromString(serialized)) {
    return absl::InvalidArgumentError("not a serialized ONNX model");
  }
  // The checker reports by exception; this is the one place they are
  // caught and turned into a status.
  try {
    onnx::checker::check_model(model);
    onnx::shape_inference::InferShapes(model);
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat("the ONNX checker refuses the model: ", e.what()));
  }
  return absl::OkStatus();
}

absl::Status WriteOnnxModel(const std::string& path, const ModelSpec& spec,
                            absl::Span<const float> params) {
  ASGD_ASSIGN_OR_RETURN(const std::string bytes, ExportOnnx(spec, params));
  ASGD_RETURN_IF_ERROR(CheckOnnx(bytes));
  return WriteBytes(path, bytes);
}

}  // namespace asgd
