// ModelSpec: an acoustic model as data, an ordered graph of layers, shared
// by the servers (which hold its tensors), the workers (which compute it)
// and the model file.
//
// A model maps input rows to a softmax over `num_classes` frame labels
// (senones / phones). Every input row is 2*context+1 consecutive feature
// frames of `feature_dim` values, stacked (context 0: one frame per row).
// The hidden layers run in order; an output layer (affine, then softmax)
// always follows them.
//
// A multi-frame model (output_frames = k > 1, frame models only) has k
// softmax heads over one shared stack of hidden layers: head j of the row
// centred on frame t predicts the label of frame t + j. Its output layer is
// one affine map to k * num_classes logits, head j's being columns
// [j * num_classes, (j + 1) * num_classes); every output of the backends
// (labels, log-posteriors, predictions) then has k entries per row, head
// after head (see model/backend.h). A decoder computes every k-th frame.
//
//   dense   y = act(W x + b) per row.
//   conv    the row read as a 1-channel image of (2*context+1) time steps ×
//           feature_dim frequency bins (or the previous conv's feature
//           maps): 2-D convolution with `filters` kernels of kernel_time ×
//           kernel_freq, stride 1, no padding, bias, activation, then
//           non-overlapping max-pooling of pool_time × pool_freq. Conv
//           layers come first in a model and only in frame models.
//   lstm    an LSTM over time (gates i, f, g, o; c = f*c' + i*g, clipped to
//           ±cell_clip when cell_clip > 0; h = o*tanh(c)), with an optional
//           recurrent projection r = W_p h (projection > 0); the layer's
//           output and recurrent input is r (or h). bidirectional: a
//           forward and a backward LSTM, outputs concatenated [fw, bw].
//
// A model with an LSTM is a sequence model: it sees minibatches of chunks of
// consecutive frames (time-major rows, see model/backend.h); other models
// see independent rows (frame models).
//
// Tensors, in this order in the flat parameter vector (ModelLayout order),
// with i the layer's index and L = layers.size() the output layer:
//   dense   layer<i>/weight [units, in], layer<i>/bias [units]
//   conv    layer<i>/filter [filters, in_channels, kernel_time, kernel_freq],
//           layer<i>/bias [filters]
//   lstm    layer<i>/w_x [4*cells, in], layer<i>/w_r [4*cells, rec],
//           layer<i>/bias [4*cells], and layer<i>/w_p [projection, cells]
//           when projected; rec = projection or cells; gate blocks of
//           cells rows in the order i, f, g, o. Bidirectional: the same
//           under layer<i>/fw/ and then layer<i>/bw/.
//   output  layer<L>/weight [k * num_classes, in], layer<L>/bias
//           [k * num_classes], k = output_frames (1 but for multi-frame
//           models)
// A DNN's tensors are thus those of earlier asgd versions.
//
// Thread-safety: plain value types and pure functions.
#ifndef ASGD_MODEL_MODEL_SPEC_H_
#define ASGD_MODEL_MODEL_SPEC_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "common/model_layout.h"

namespace asgd {

enum class Activation { kNone, kRelu, kSigmoid, kTanh };

// "none", "relu", "sigmoid", "tanh".
absl::StatusOr<Activation> ParseActivation(absl::string_view text);
absl::string_view ActivationName(Activation a);

struct DenseLayerSpec {
  int units = 0;
  Activation activation = Activation::kRelu;
};

struct ConvLayerSpec {
  int filters = 0;
  int kernel_time = 3;
  int kernel_freq = 8;
  int pool_time = 1;
  int pool_freq = 3;
  Activation activation = Activation::kRelu;
};

struct LstmLayerSpec {
  int cells = 0;
  int projection = 0;      // 0: no projection
  float cell_clip = 0.0f;  // 0: no clipping
  bool bidirectional = false;
};

enum class LayerKind { kDense, kConv, kLstm };

// One hidden layer: `kind` says which of the three parts is meaningful.
struct LayerSpec {
  LayerKind kind = LayerKind::kDense;
  DenseLayerSpec dense;
  ConvLayerSpec conv;
  LstmLayerSpec lstm;

  static LayerSpec Dense(int units, Activation activation);
  static LayerSpec Conv(const ConvLayerSpec& conv);
  static LayerSpec Lstm(const LstmLayerSpec& lstm);
};

// "dense", "conv", "lstm".
absl::string_view LayerKindName(LayerKind kind);

// The shape of the values between two layers, per row: `channels` feature
// maps of time × freq (conv layers), or a plain vector of freq values
// (channels = time = 1).
struct FeatureShape {
  int channels = 1;
  int time = 1;
  int freq = 0;
  int dim() const { return channels * time * freq; }
  bool operator==(const FeatureShape& o) const {
    return channels == o.channels && time == o.time && freq == o.freq;
  }
};

struct ModelSpec {
  int feature_dim = 40;
  int context = 5;
  std::vector<LayerSpec> layers;
  int num_classes = 40;
  // Softmax heads, each for the next frame (see the top of this file).
  int output_frames = 1;

  // Values per input row: (2 * context + 1) * feature_dim.
  int input_dim() const { return (2 * context + 1) * feature_dim; }
  // True when a layer is an LSTM (the model sees sequences).
  bool is_sequence() const;
  // Logits (and log-posteriors) per row: output_frames * num_classes.
  int output_dim() const { return output_frames * num_classes; }
};

// InvalidArgument, naming the layer and the problem, unless: sizes are
// positive; num_classes > 1; conv layers come first, in a frame model, and
// each leaves at least one time step and frequency bin; cell_clip >= 0;
// the model has at most kMaxLayers layers and kMaxParams parameters;
// output_frames is in [1, kMaxOutputFrames], and 1 for a sequence model.
inline constexpr int kMaxLayers = 64;
inline constexpr int kMaxOutputFrames = 16;
inline constexpr int64_t kMaxParams = int64_t{1} << 31;
absl::Status ValidateModelSpec(const ModelSpec& spec);

// The shape entering hidden layer i (i = layers.size(): the output layer)
// and the shape it produces. The spec must be valid.
FeatureShape LayerInputShape(const ModelSpec& spec, int layer);
FeatureShape LayerOutputShape(const ModelSpec& spec, int layer);

// The model's tensors in flat-vector order (see the top of this file), and
// the tensors of hidden layer i alone with their names relative to
// "layer<i>/" (e.g. "w_x", "fw/w_x"). The spec must be valid.
std::vector<TensorSpec> ModelTensors(const ModelSpec& spec);
std::vector<TensorSpec> LayerTensors(const ModelSpec& spec, int layer);

// Number of parameters of hidden layer i (i = layers.size(): the output
// layer), of the whole model, and where layer i's parameters start in the
// flat vector.
int64_t LayerParamCount(const ModelSpec& spec, int layer);
int64_t ModelParamCount(const ModelSpec& spec);
int64_t LayerParamOffset(const ModelSpec& spec, int layer);

// Deterministic initial value of the whole flat model, a function of the
// spec and the seed only: weights uniform in ±sqrt(6 / (fan_in + fan_out))
// (×4 before a sigmoid), biases 0 except an LSTM's forget gate (1).
std::vector<float> InitialParams(const ModelSpec& spec, uint64_t seed);

// Multiply-adds of one training step (forward + backward: 3 × forward) for
// one input row, for reporting FLOP rates (2 FLOPs per multiply-add).
int64_t TrainingMacsPerRow(const ModelSpec& spec);
// The same for hidden layer i alone (i = layers.size(): the output layer);
// TrainingMacsPerRow is their sum.
int64_t LayerTrainingMacsPerRow(const ModelSpec& spec, int layer);

// One line, e.g. "conv(32,3x8,pool 1x3,relu) dense(512,relu) softmax(40)
// on 11x40 inputs": for logs and --help.
std::string DescribeModel(const ModelSpec& spec);

// Parses "512,512" (empty string: none). InvalidArgument on anything but
// positive integers.
absl::StatusOr<std::vector<int>> ParseLayerSizes(absl::string_view text);

}  // namespace asgd

#endif  // ASGD_MODEL_MODEL_SPEC_H_
