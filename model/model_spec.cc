#include "model/model_spec.h"

#include <cmath>
#include <random>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace asgd {

absl::StatusOr<Activation> ParseActivation(absl::string_view text) {
  if (text == "none") return Activation::kNone;
  if (text == "relu") return Activation::kRelu;
  if (text == "sigmoid") return Activation::kSigmoid;
  if (text == "tanh") return Activation::kTanh;
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown activation '", text, "' (want relu, sigmoid, tanh or none)"));
}

absl::string_view ActivationName(Activation a) {
  switch (a) {
    case Activation::kNone:
      return "none";
    case Activation::kRelu:
      return "relu";
    case Activation::kSigmoid:
      return "sigmoid";
    case Activation::kTanh:
      return "tanh";
  }
  return "?";
}

absl::string_view LayerKindName(LayerKind kind) {
  switch (kind) {
    case LayerKind::kDense:
      return "dense";
    case LayerKind::kConv:
      return "conv";
    case LayerKind::kLstm:
      return "lstm";
  }
  return "?";
}

LayerSpec LayerSpec::Dense(int units, Activation activation) {
  LayerSpec l;
  l.kind = LayerKind::kDense;
  l.dense.units = units;
  l.dense.activation = activation;
  return l;
}

LayerSpec LayerSpec::Conv(const ConvLayerSpec& conv) {
  LayerSpec l;
  l.kind = LayerKind::kConv;
  l.conv = conv;
  return l;
}

LayerSpec LayerSpec::Lstm(const LstmLayerSpec& lstm) {
  LayerSpec l;
  l.kind = LayerKind::kLstm;
  l.lstm = lstm;
  return l;
}

bool ModelSpec::is_sequence() const {
  for (const LayerSpec& l : layers) {
    if (l.kind == LayerKind::kLstm) return true;
  }
  return false;
}

namespace {

// The output shape of `layer` applied to `in`; no validation.
FeatureShape Apply(const LayerSpec& layer, const FeatureShape& in) {
  switch (layer.kind) {
    case LayerKind::kDense:
      return {1, 1, layer.dense.units};
    case LayerKind::kConv: {
      const ConvLayerSpec& c = layer.conv;
      return {c.filters, (in.time - c.kernel_time + 1) / c.pool_time,
              (in.freq - c.kernel_freq + 1) / c.pool_freq};
    }
    case LayerKind::kLstm: {
      const LstmLayerSpec& l = layer.lstm;
      const int rec = l.projection > 0 ? l.projection : l.cells;
      return {1, 1, l.bidirectional ? 2 * rec : rec};
    }
  }
  return in;
}

FeatureShape InputShape(const ModelSpec& spec) {
  return {1, 2 * spec.context + 1, spec.feature_dim};
}

// Hidden layer i's tensors (relative names), given its input shape.
std::vector<TensorSpec> HiddenTensors(const LayerSpec& layer,
                                      const FeatureShape& in) {
  switch (layer.kind) {
    case LayerKind::kDense:
      return {{"weight", {layer.dense.units, in.dim()}},
              {"bias", {layer.dense.units}}};
    case LayerKind::kConv: {
      const ConvLayerSpec& c = layer.conv;
      return {{"filter", {c.filters, in.channels, c.kernel_time, c.kernel_freq}},
              {"bias", {c.filters}}};
    }
    case LayerKind::kLstm: {
      const LstmLayerSpec& l = layer.lstm;
      const int64_t gates = int64_t{4} * l.cells;
      const int rec = l.projection > 0 ? l.projection : l.cells;
      std::vector<TensorSpec> one = {{"w_x", {gates, in.dim()}},
                                     {"w_r", {gates, rec}},
                                     {"bias", {gates}}};
      if (l.projection > 0) one.push_back({"w_p", {l.projection, l.cells}});
      if (!l.bidirectional) return one;
      std::vector<TensorSpec> both;
      for (const char* dir : {"fw/", "bw/"}) {
        for (const TensorSpec& t : one) {
          both.push_back({absl::StrCat(dir, t.name), t.shape});
        }
      }
      return both;
    }
  }
  return {};
}

int64_t Elements(const TensorSpec& t) {
  int64_t n = 1;
  for (int64_t d : t.shape) n *= d;
  return n;
}

absl::Status LayerError(int i, const LayerSpec& l, absl::string_view what) {
  return absl::InvalidArgumentError(
      absl::StrCat("layer ", i, " (", LayerKindName(l.kind), "): ", what));
}

}  // namespace

absl::Status ValidateModelSpec(const ModelSpec& spec) {
  if (spec.feature_dim < 1 || spec.context < 0 || spec.num_classes < 2) {
    return absl::InvalidArgumentError(absl::StrCat(
        "want feature_dim >= 1, context >= 0 and num_classes >= 2, got ",
        spec.feature_dim, ", ", spec.context, " and ", spec.num_classes));
  }
  if (spec.feature_dim > (1 << 16) || spec.context > 1000 ||
      spec.num_classes > (1 << 20)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "feature_dim (at most 65536), context (at most 1000) or num_classes "
        "(at most 1048576) too large: ",
        spec.feature_dim, ", ", spec.context, ", ", spec.num_classes));
  }
  if (static_cast<int>(spec.layers.size()) > kMaxLayers) {
    return absl::InvalidArgumentError(absl::StrCat(
        spec.layers.size(), " layers; at most ", kMaxLayers, " are allowed"));
  }
  if (spec.output_frames < 1 || spec.output_frames > kMaxOutputFrames) {
    return absl::InvalidArgumentError(
        absl::StrCat("output_frames must be in [1, ", kMaxOutputFrames,
                     "], got ", spec.output_frames));
  }
  if (spec.output_frames > 1 && spec.is_sequence()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "output_frames ", spec.output_frames,
        ": a multi-frame output needs a frame model (no lstm)"));
  }
  constexpr int kMaxWidth = 1 << 16;
  FeatureShape shape = InputShape(spec);
  bool past_conv = false;
  for (int i = 0; i < static_cast<int>(spec.layers.size()); ++i) {
    const LayerSpec& l = spec.layers[i];
    switch (l.kind) {
      case LayerKind::kDense:
        if (l.dense.units < 1 || l.dense.units > kMaxWidth) {
          return LayerError(i, l, absl::StrCat("units must be in [1, ",
                                               kMaxWidth, "], got ",
                                               l.dense.units));
        }
        past_conv = true;
        break;
      case LayerKind::kConv: {
        const ConvLayerSpec& c = l.conv;
        if (past_conv) {
          return LayerError(i, l, "conv layers must come before all others");
        }
        if (spec.is_sequence()) {
          return LayerError(i, l, "conv layers need a frame model (no lstm)");
        }
        if (c.filters < 1 || c.filters > kMaxWidth || c.kernel_time < 1 ||
            c.kernel_freq < 1 || c.pool_time < 1 || c.pool_freq < 1) {
          return LayerError(i, l,
                            "filters, kernel and pool sizes must be >= 1");
        }
        if (c.kernel_time > shape.time || c.kernel_freq > shape.freq) {
          return LayerError(
              i, l,
              absl::StrCat("kernel ", c.kernel_time, "x", c.kernel_freq,
                           " larger than its input of ", shape.time, "x",
                           shape.freq, " (time x frequency)"));
        }
        const FeatureShape out = Apply(l, shape);
        if (out.time < 1 || out.freq < 1) {
          return LayerError(
              i, l,
              absl::StrCat("pooling ", c.pool_time, "x", c.pool_freq,
                           " leaves nothing of ",
                           shape.time - c.kernel_time + 1, "x",
                           shape.freq - c.kernel_freq + 1));
        }
        break;
      }
      case LayerKind::kLstm: {
        const LstmLayerSpec& s = l.lstm;
        if (s.cells < 1 || s.cells > kMaxWidth || s.projection < 0 ||
            s.projection > kMaxWidth) {
          return LayerError(i, l,
                            absl::StrCat("cells must be in [1, ", kMaxWidth,
                                         "] and projection in [0, ",
                                         kMaxWidth, "]"));
        }
        if (!std::isfinite(s.cell_clip) || s.cell_clip < 0) {
          return LayerError(i, l, "cell_clip must be finite and >= 0");
        }
        past_conv = true;
        break;
      }
    }
    shape = Apply(l, shape);
    if (shape.dim() > (1 << 24)) {
      return LayerError(i, l, absl::StrCat("output of ", shape.dim(),
                                           " values per row is too large"));
    }
  }
  // Parameter count, in 64-bit arithmetic (shapes are bounded above).
  int64_t params = 0;
  for (const TensorSpec& t : ModelTensors(spec)) params += Elements(t);
  if (params > kMaxParams) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the model has ", params, " parameters; at most ", kMaxParams,
        " are supported"));
  }
  return absl::OkStatus();
}

FeatureShape LayerInputShape(const ModelSpec& spec, int layer) {
  FeatureShape shape = InputShape(spec);
  for (int i = 0; i < layer; ++i) shape = Apply(spec.layers[i], shape);
  return shape;
}

FeatureShape LayerOutputShape(const ModelSpec& spec, int layer) {
  if (layer == static_cast<int>(spec.layers.size())) {
    return {1, 1, spec.output_dim()};
  }
  return Apply(spec.layers[layer], LayerInputShape(spec, layer));
}

std::vector<TensorSpec> LayerTensors(const ModelSpec& spec, int layer) {
  const FeatureShape in = LayerInputShape(spec, layer);
  if (layer == static_cast<int>(spec.layers.size())) {
    return {{"weight", {spec.output_dim(), in.dim()}},
            {"bias", {spec.output_dim()}}};
  }
  return HiddenTensors(spec.layers[layer], in);
}

std::vector<TensorSpec> ModelTensors(const ModelSpec& spec) {
  std::vector<TensorSpec> out;
  for (int i = 0; i <= static_cast<int>(spec.layers.size()); ++i) {
    for (TensorSpec& t : LayerTensors(spec, i)) {
      out.push_back({absl::StrCat("layer", i, "/", t.name), std::move(t.shape)});
    }
  }
  return out;
}

int64_t LayerParamCount(const ModelSpec& spec, int layer) {
  int64_t n = 0;
  for (const TensorSpec& t : LayerTensors(spec, layer)) n += Elements(t);
  return n;
}

int64_t ModelParamCount(const ModelSpec& spec) {
  return LayerParamOffset(spec, static_cast<int>(spec.layers.size()) + 1);
}

int64_t LayerParamOffset(const ModelSpec& spec, int layer) {
  int64_t offset = 0;
  for (int i = 0; i < layer; ++i) offset += LayerParamCount(spec, i);
  return offset;
}

namespace {

// Fills `n` floats uniform in ±limit from `rng`.
void Uniform(std::mt19937_64& rng, double limit, int64_t n, float* out) {
  std::uniform_real_distribution<float> dist(-limit, limit);
  for (int64_t i = 0; i < n; ++i) out[i] = dist(rng);
}

double GlorotLimit(int64_t fan_in, int64_t fan_out) {
  return std::sqrt(6.0 / static_cast<double>(fan_in + fan_out));
}

// The activation that follows layer i's output (for the sigmoid gain).
bool FeedsSigmoid(const ModelSpec& spec, int layer) {
  if (layer >= static_cast<int>(spec.layers.size())) return false;
  const LayerSpec& l = spec.layers[layer];
  return (l.kind == LayerKind::kDense &&
          l.dense.activation == Activation::kSigmoid) ||
         (l.kind == LayerKind::kConv &&
          l.conv.activation == Activation::kSigmoid);
}

}  // namespace

std::vector<float> InitialParams(const ModelSpec& spec, uint64_t seed) {
  std::vector<float> params(ModelParamCount(spec), 0.0f);
  const int num = static_cast<int>(spec.layers.size());
  for (int i = 0; i <= num; ++i) {
    // Every layer's stream depends on the seed and its index only (the
    // first layer's stream is the one earlier DNN versions used).
    std::mt19937_64 rng(seed * 1000003ull + static_cast<uint64_t>(i));
    float* p = params.data() + LayerParamOffset(spec, i);
    const double gain = FeedsSigmoid(spec, i) ? 4.0 : 1.0;
    const bool lstm = i < num && spec.layers[i].kind == LayerKind::kLstm;
    for (const TensorSpec& t : LayerTensors(spec, i)) {
      const int64_t n = Elements(t);
      const bool bias = absl::EndsWith(t.name, "bias");
      if (bias) {
        if (lstm) {
          // Forget gate bias 1 (the second block of `cells` values).
          const int cells = spec.layers[i].lstm.cells;
          std::fill(p + cells, p + 2 * cells, 1.0f);
        }
      } else if (t.shape.size() == 4) {  // conv filter [out, in, kt, kf]
        const int64_t area = t.shape[2] * t.shape[3];
        Uniform(rng, gain * GlorotLimit(t.shape[1] * area, t.shape[0] * area),
                n, p);
      } else {
        const int64_t rows = absl::EndsWith(t.name, "w_x") ||
                                     absl::EndsWith(t.name, "w_r")
                                 ? t.shape[0] / 4  // per gate
                                 : t.shape[0];
        Uniform(rng, gain * GlorotLimit(t.shape[1], rows), n, p);
      }
      p += n;
    }
  }
  return params;
}

int64_t LayerTrainingMacsPerRow(const ModelSpec& spec, int layer) {
  int64_t macs = 0;
  const int num = static_cast<int>(spec.layers.size());
  if (layer < num && spec.layers[layer].kind == LayerKind::kConv) {
    // Each output position before pooling: filters × in_ch × kt × kf.
    const ConvLayerSpec& c = spec.layers[layer].conv;
    const FeatureShape in = LayerInputShape(spec, layer);
    const int64_t positions = int64_t{in.time - c.kernel_time + 1} *
                              (in.freq - c.kernel_freq + 1);
    macs = positions * c.filters * in.channels * c.kernel_time * c.kernel_freq;
  } else {
    // Dense and LSTM: every weight (not bias) is used once per row.
    for (const TensorSpec& t : LayerTensors(spec, layer)) {
      if (t.shape.size() == 2) macs += Elements(t);
    }
  }
  return 3 * macs;
}

int64_t TrainingMacsPerRow(const ModelSpec& spec) {
  int64_t macs = 0;
  for (int i = 0; i <= static_cast<int>(spec.layers.size()); ++i) {
    macs += LayerTrainingMacsPerRow(spec, i);
  }
  return macs;
}

std::string DescribeModel(const ModelSpec& spec) {
  std::vector<std::string> parts;
  for (const LayerSpec& l : spec.layers) {
    switch (l.kind) {
      case LayerKind::kDense:
        parts.push_back(absl::StrCat("dense(", l.dense.units, ",",
                                     ActivationName(l.dense.activation), ")"));
        break;
      case LayerKind::kConv: {
        const ConvLayerSpec& c = l.conv;
        parts.push_back(absl::StrCat("conv(", c.filters, ",", c.kernel_time,
                                     "x", c.kernel_freq, ",pool ", c.pool_time,
                                     "x", c.pool_freq, ",",
                                     ActivationName(c.activation), ")"));
        break;
      }
      case LayerKind::kLstm: {
        const LstmLayerSpec& s = l.lstm;
        std::string text = absl::StrCat(s.bidirectional ? "blstm(" : "lstm(",
                                        s.cells);
        if (s.projection > 0) absl::StrAppend(&text, ",proj ", s.projection);
        if (s.cell_clip > 0) absl::StrAppend(&text, ",clip ", s.cell_clip);
        parts.push_back(absl::StrCat(text, ")"));
        break;
      }
    }
  }
  parts.push_back(absl::StrCat("softmax(", spec.num_classes, ")"));
  if (spec.output_frames > 1) {
    parts.back() = absl::StrCat(spec.output_frames, "x", parts.back());
  }
  return absl::StrCat(absl::StrJoin(parts, " "), " on ",
                      2 * spec.context + 1, "x", spec.feature_dim, " inputs");
}

absl::StatusOr<std::vector<int>> ParseLayerSizes(absl::string_view text) {
  std::vector<int> sizes;
  text = absl::StripAsciiWhitespace(text);
  if (text.empty()) return sizes;
  for (absl::string_view part : absl::StrSplit(text, ',')) {
    int v = 0;
    if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(part), &v) || v <= 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "bad layer size '", part, "' in '", text,
          "' (want comma-separated positive integers, e.g. 512,512)"));
    }
    sizes.push_back(v);
  }
  return sizes;
}

}  // namespace asgd
