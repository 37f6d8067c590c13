// DnnSpec: the shape of the DNN acoustic model, shared by server and worker.
//
// The model is a feed-forward network: input (context frames x feature dim),
// hidden layers with one activation, and a softmax over frame labels. Layer i
// has tensors "layer<i>/weight" of shape [out, in] (row-major) and
// "layer<i>/bias" of shape [out]; the last layer is the output layer.
//
// Thread-safety: plain value types and pure functions.
#ifndef ASGD_COMMON_DNN_SPEC_H_
#define ASGD_COMMON_DNN_SPEC_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "common/model_layout.h"

namespace asgd {

enum class Activation { kSigmoid, kRelu };

struct DnnSpec {
  int input_dim = 440;           // 11 stacked frames of 40 log-mel features
  std::vector<int> hidden = {512, 512};
  int num_classes = 40;
  Activation activation = Activation::kRelu;

  int num_layers() const { return static_cast<int>(hidden.size()) + 1; }
  int layer_in(int l) const { return l == 0 ? input_dim : hidden[l - 1]; }
  int layer_out(int l) const {
    return l == num_layers() - 1 ? num_classes : hidden[l];
  }
};

// "sigmoid" / "relu".
absl::StatusOr<Activation> ParseActivation(absl::string_view text);
absl::string_view ActivationName(Activation a);

// Parses "512,512" (empty string: no hidden layer). InvalidArgument on
// anything but positive integers.
absl::StatusOr<std::vector<int>> ParseLayerSizes(absl::string_view text);

// InvalidArgument unless all sizes are positive.
absl::Status ValidateDnnSpec(const DnnSpec& spec);

// The model's tensors in order: layer0/weight, layer0/bias, layer1/weight, ...
std::vector<TensorSpec> DnnTensors(const DnnSpec& spec);

// Deterministic initial value of the whole flat model (layout order):
// weights uniform in +-sqrt(6 / (fan_in + fan_out)) (x4 for sigmoid), biases 0.
// Depends only on `spec` and `seed`, not on the pool shape.
std::vector<float> InitialDnnParams(const DnnSpec& spec, uint64_t seed);

}  // namespace asgd

#endif  // ASGD_COMMON_DNN_SPEC_H_
