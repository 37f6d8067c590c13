// The model kinds a server can be started with by name (--model=dnn|cnn|
// lstm|blstm) and a few shape flags; anything else is a model config file
// (model/model_spec_proto.h).
//
//   dnn    [dense(h, act)] for h in hidden            context 5
//   cnn    conv(conv_filters, 3x8, pool 1x3), conv(2*conv_filters, 3x4,
//          pool 1x1), then [dense(h, act)] for h in hidden   context 5
//   lstm   lstm_layers × lstm(lstm_cells, projection, clip), then
//          [dense(h, act)] for h in hidden            context 0
//   blstm  the same with bidirectional LSTMs          context 0
//
// `hidden` is "" for none; "auto" picks the kind's default (dnn 512,512;
// cnn 512; lstm and blstm none). context < 0 picks the kind's default.
//
// Thread-safety: pure functions.
#ifndef ASGD_MODEL_MODEL_PRESETS_H_
#define ASGD_MODEL_MODEL_PRESETS_H_

#include <string>

#include "absl/status/statusor.h"
#include "model/model_spec.h"

namespace asgd {

// "dnn, cnn, lstm, blstm", for flag help.
inline constexpr char kModelKinds[] = "dnn, cnn, lstm, blstm";

struct ModelShapeOptions {
  std::string kind = "dnn";
  int feature_dim = 40;
  int context = -1;
  int num_classes = 40;
  std::string hidden = "auto";
  std::string activation = "relu";
  int conv_filters = 32;
  int lstm_cells = 256;
  int lstm_layers = 2;
  int lstm_projection = 0;
  float cell_clip = 0.0f;
  int output_frames = 1;  // dnn, cnn: softmax heads (multi-frame model)
};

// InvalidArgument for an unknown kind or bad sizes (the message names the
// flag), or a spec ValidateModelSpec refuses.
absl::StatusOr<ModelSpec> PresetModel(const ModelShapeOptions& options);

}  // namespace asgd

#endif  // ASGD_MODEL_MODEL_PRESETS_H_
