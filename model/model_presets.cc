#include "model/model_presets.h"

#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace asgd {

absl::StatusOr<ModelSpec> PresetModel(const ModelShapeOptions& o) {
  const bool dnn = o.kind == "dnn", cnn = o.kind == "cnn";
  const bool lstm = o.kind == "lstm", blstm = o.kind == "blstm";
  if (!dnn && !cnn && !lstm && !blstm) {
    return absl::InvalidArgumentError(absl::StrCat(
        "unknown model kind '", o.kind, "' (want one of ", kModelKinds,
        ", or a model config file)"));
  }
  ModelSpec spec;
  spec.feature_dim = o.feature_dim;
  spec.num_classes = o.num_classes;
  spec.output_frames = o.output_frames;
  spec.context = o.context >= 0 ? o.context : (dnn || cnn ? 5 : 0);
  ASGD_ASSIGN_OR_RETURN(Activation act, ParseActivation(o.activation));
  std::string hidden_text = o.hidden;
  if (hidden_text == "auto") hidden_text = dnn ? "512,512" : cnn ? "512" : "";
  ASGD_ASSIGN_OR_RETURN(std::vector<int> hidden, ParseLayerSizes(hidden_text));

  if (cnn) {
    if (o.conv_filters < 1) {
      return absl::InvalidArgumentError("--conv_filters must be >= 1");
    }
    ConvLayerSpec c1;
    c1.filters = o.conv_filters;
    c1.kernel_time = 3;
    c1.kernel_freq = 8;
    c1.pool_freq = 3;
    c1.activation = act;
    ConvLayerSpec c2;
    c2.filters = 2 * o.conv_filters;
    c2.kernel_time = 3;
    c2.kernel_freq = 4;
    c2.pool_freq = 1;
    c2.activation = act;
    spec.layers = {LayerSpec::Conv(c1), LayerSpec::Conv(c2)};
  }
  if (lstm || blstm) {
    if (o.lstm_layers < 1 || o.lstm_cells < 1 || o.lstm_projection < 0 ||
        !(o.cell_clip >= 0)) {
      return absl::InvalidArgumentError(
          "--lstm_layers and --lstm_cells must be >= 1, --lstm_projection "
          "and --cell_clip >= 0");
    }
    LstmLayerSpec l;
    l.cells = o.lstm_cells;
    l.projection = o.lstm_projection;
    l.cell_clip = o.cell_clip;
    l.bidirectional = blstm;
    spec.layers.assign(o.lstm_layers, LayerSpec::Lstm(l));
  }
  for (int h : hidden) spec.layers.push_back(LayerSpec::Dense(h, act));
  ASGD_RETURN_IF_ERROR(ValidateModelSpec(spec));
  return spec;
}

}  // namespace asgd
