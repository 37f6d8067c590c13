#include "model/model_spec_proto.h"

#include <cstdint>
#include <fstream>
#include <sstream>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "google/protobuf/io/tokenizer.h"
#include "google/protobuf/text_format.h"

namespace asgd {
namespace {

using Proto = asgd::v1::ModelSpec;

asgd::v1::Activation ActivationToProto(Activation a) {
  switch (a) {
    case Activation::kRelu:
      return asgd::v1::RELU;
    case Activation::kSigmoid:
      return asgd::v1::SIGMOID;
    case Activation::kTanh:
      return asgd::v1::TANH;
    case Activation::kNone:
      return asgd::v1::NONE;
  }
  return asgd::v1::RELU;
}

absl::StatusOr<Activation> ActivationFromProto(int value, int layer) {
  switch (value) {
    case asgd::v1::RELU:
      return Activation::kRelu;
    case asgd::v1::SIGMOID:
      return Activation::kSigmoid;
    case asgd::v1::TANH:
      return Activation::kTanh;
    case asgd::v1::NONE:
      return Activation::kNone;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("layer ", layer, ": unknown activation ", value));
}

// A uint32 field as an int, refusing values an int cannot hold.
absl::StatusOr<int> Int(uint32_t value, absl::string_view what) {
  if (value > (1u << 30)) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " = ", value, " is out of range"));
  }
  return static_cast<int>(value);
}

// Records the first error the text parser reports, with its position.
class ErrorCollector : public google::protobuf::io::ErrorCollector {
 public:
  void AddError(int line, int column, const std::string& message) override {
    if (error_.empty()) {
      error_ = absl::StrCat("line ", line + 1, ", column ", column + 1, ": ",
                            message);
    }
  }
  void AddWarning(int, int, const std::string&) override {}
  const std::string& error() const { return error_; }

 private:
  std::string error_;
};

}  // namespace

Proto ModelSpecToProto(const ModelSpec& spec) {
  Proto msg;
  msg.set_feature_dim(spec.feature_dim);
  msg.set_context(spec.context);
  msg.set_num_classes(spec.num_classes);
  if (spec.output_frames != 1) msg.set_output_frames(spec.output_frames);
  for (const LayerSpec& l : spec.layers) {
    asgd::v1::Layer* layer = msg.add_layers();
    switch (l.kind) {
      case LayerKind::kDense:
        layer->mutable_dense()->set_units(l.dense.units);
        layer->mutable_dense()->set_activation(
            ActivationToProto(l.dense.activation));
        break;
      case LayerKind::kConv: {
        asgd::v1::ConvLayer* c = layer->mutable_conv();
        c->set_filters(l.conv.filters);
        c->set_kernel_time(l.conv.kernel_time);
        c->set_kernel_freq(l.conv.kernel_freq);
        c->set_pool_time(l.conv.pool_time);
        c->set_pool_freq(l.conv.pool_freq);
        c->set_activation(ActivationToProto(l.conv.activation));
        break;
      }
      case LayerKind::kLstm: {
        asgd::v1::LstmLayer* s = layer->mutable_lstm();
        s->set_cells(l.lstm.cells);
        s->set_projection(l.lstm.projection);
        s->set_cell_clip(l.lstm.cell_clip);
        s->set_bidirectional(l.lstm.bidirectional);
        break;
      }
    }
  }
  return msg;
}

absl::StatusOr<ModelSpec> ModelSpecFromProto(const Proto& msg) {
  ModelSpec spec;
  ASGD_ASSIGN_OR_RETURN(spec.feature_dim, Int(msg.feature_dim(), "feature_dim"));
  ASGD_ASSIGN_OR_RETURN(spec.context, Int(msg.context(), "context"));
  ASGD_ASSIGN_OR_RETURN(spec.num_classes, Int(msg.num_classes(), "num_classes"));
  if (msg.output_frames() != 0) {
    ASGD_ASSIGN_OR_RETURN(spec.output_frames,
                          Int(msg.output_frames(), "output_frames"));
  }
  if (msg.layers_size() > kMaxLayers) {
    return absl::InvalidArgumentError(absl::StrCat(
        msg.layers_size(), " layers; at most ", kMaxLayers, " are allowed"));
  }
  for (int i = 0; i < msg.layers_size(); ++i) {
    const asgd::v1::Layer& layer = msg.layers(i);
    const std::string at = absl::StrCat("layer ", i, ": ");
    LayerSpec l;
    switch (layer.kind_case()) {
      case asgd::v1::Layer::kDense: {
        l.kind = LayerKind::kDense;
        ASGD_ASSIGN_OR_RETURN(l.dense.units,
                              Int(layer.dense().units(), at + "units"));
        ASGD_ASSIGN_OR_RETURN(l.dense.activation,
                              ActivationFromProto(layer.dense().activation(), i));
        break;
      }
      case asgd::v1::Layer::kConv: {
        const asgd::v1::ConvLayer& c = layer.conv();
        l.kind = LayerKind::kConv;
        ConvLayerSpec defaults;
        ASGD_ASSIGN_OR_RETURN(l.conv.filters, Int(c.filters(), at + "filters"));
        auto size = [&](uint32_t v, int fallback,
                        absl::string_view name) -> absl::StatusOr<int> {
          if (v == 0) return fallback;
          return Int(v, at + std::string(name));
        };
        ASGD_ASSIGN_OR_RETURN(l.conv.kernel_time,
                              size(c.kernel_time(), defaults.kernel_time, "kernel_time"));
        ASGD_ASSIGN_OR_RETURN(l.conv.kernel_freq,
                              size(c.kernel_freq(), defaults.kernel_freq, "kernel_freq"));
        ASGD_ASSIGN_OR_RETURN(l.conv.pool_time,
                              size(c.pool_time(), defaults.pool_time, "pool_time"));
        ASGD_ASSIGN_OR_RETURN(l.conv.pool_freq,
                              size(c.pool_freq(), defaults.pool_freq, "pool_freq"));
        ASGD_ASSIGN_OR_RETURN(l.conv.activation,
                              ActivationFromProto(c.activation(), i));
        break;
      }
      case asgd::v1::Layer::kLstm: {
        const asgd::v1::LstmLayer& s = layer.lstm();
        l.kind = LayerKind::kLstm;
        ASGD_ASSIGN_OR_RETURN(l.lstm.cells, Int(s.cells(), at + "cells"));
        ASGD_ASSIGN_OR_RETURN(l.lstm.projection,
                              Int(s.projection(), at + "projection"));
        l.lstm.cell_clip = s.cell_clip();
        l.lstm.bidirectional = s.bidirectional();
        break;
      }
      default:
        return absl::InvalidArgumentError(
            absl::StrCat(at, "no kind (want dense, conv or lstm)"));
    }
    spec.layers.push_back(l);
  }
  ASGD_RETURN_IF_ERROR(ValidateModelSpec(spec));
  return spec;
}

absl::StatusOr<ModelSpec> ParseModelConfig(absl::string_view text) {
  constexpr size_t kMaxText = 1 << 20;
  if (text.size() > kMaxText) {
    return absl::InvalidArgumentError(absl::StrCat(
        "model config of ", text.size(), " bytes; at most ", kMaxText));
  }
  Proto msg;
  google::protobuf::TextFormat::Parser parser;
  ErrorCollector errors;
  parser.RecordErrorsTo(&errors);
  if (!parser.ParseFromString(std::string(text), &msg)) {
    return absl::InvalidArgumentError(
        absl::StrCat("model config: ", errors.error().empty()
                                            ? "cannot parse"
                                            : errors.error()));
  }
  return ModelSpecFromProto(msg);
}

absl::StatusOr<ModelSpec> ReadModelConfig(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", path));
  std::ostringstream text;
  text << in.rdbuf();
  auto spec = ParseModelConfig(text.str());
  if (!spec.ok()) {
    return absl::Status(spec.status().code(),
                        absl::StrCat(path, ": ", spec.status().message()));
  }
  return spec;
}

std::string ModelSpecToText(const ModelSpec& spec) {
  google::protobuf::TextFormat::Printer printer;
  printer.SetSingleLineMode(true);
  std::string text;
  printer.PrintToString(ModelSpecToProto(spec), &text);
  while (!text.empty() && text.back() == ' ') text.pop_back();
  return text;
}

std::string ModelSpecDigest(const ModelSpec& spec) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : ModelSpecToText(spec)) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return absl::StrFormat("%016x", h);
}

}  // namespace asgd
