// Layer: the forward and backward pass of one hidden layer on the CPU. Every
// layer type of model/model_spec.h implements it in this directory (dense.cc,
// conv.cc, lstm.cc); CreateLayer() picks the implementation for a LayerSpec,
// and the CPU backend (model/cpu_backend.h) runs them in order.
//
// Data layout. A batch is `sequences` × `steps` rows (frame models: steps =
// 1), time-major: row t * sequences + b is step t of sequence b. Each row of
// the input holds in_shape.dim() floats (conv: channels × time × freq,
// channel-major, then time, then frequency), each output row out_shape.dim()
// floats. Layers that look at rows independently (dense, conv) ignore the
// sequence structure; recurrent ones (lstm) run over the steps of each
// sequence, from a zero state at step 0.
//
// Parameters. `params` points at this layer's part of the flat model
// (LayerParamCount floats at LayerParamOffset), laid out as its tensors in
// LayerTensors order; `dparams` at the same part of the gradient.
//
//   auto layer = CreateLayer(spec, /*index=*/1, /*max_rows=*/256);
//   (*layer)->Forward(params, in, sequences, steps, out);
//   ... loss, dout = dL/dout ...
//   (*layer)->Backward(params, in, out, dout, sequences, steps, dparams, din);
//
// Contract:
//  * rows = sequences * steps is at least 1 and at most the max_rows given
//    to CreateLayer; callers check this before calling (the backend does).
//  * Forward writes all of `out` and keeps what Backward needs (activations,
//    gates, pooling choices) in the layer's own scratch. Backward must follow
//    the Forward of the same batch, with the same `params`, `in` and `out`.
//  * Backward writes (not adds) all of `dparams`, and all of `din` unless
//    `din` is null (the first layer needs no input gradient).
//  * Neither allocates memory after CreateLayer (scratch is sized for
//    max_rows), nor keeps pointers across calls.
//
// Thread-safety: a Layer owns scratch memory; use each instance from one
// thread at a time. Create one set of layers per backend.
#ifndef ASGD_MODEL_LAYERS_LAYER_H_
#define ASGD_MODEL_LAYERS_LAYER_H_

#include <memory>

#include "absl/status/statusor.h"
#include "model/model_spec.h"

namespace asgd {

class Layer {
 public:
  virtual ~Layer() = default;

  virtual FeatureShape in_shape() const = 0;
  virtual FeatureShape out_shape() const = 0;

  virtual void Forward(const float* params, const float* in, int sequences,
                       int steps, float* out) = 0;

  virtual void Backward(const float* params, const float* in, const float* out,
                        const float* dout, int sequences, int steps,
                        float* dparams, float* din) = 0;
};

// The CPU implementation of hidden layer `index` of `spec` (an index equal
// to spec.layers.size() gives the output layer's affine part: a dense layer
// of num_classes units without activation; the softmax is the backend's).
// InvalidArgument for an invalid spec, an index out of range or
// max_rows < 1.
absl::StatusOr<std::unique_ptr<Layer>> CreateLayer(const ModelSpec& spec,
                                                   int index, int max_rows);

}  // namespace asgd

#endif  // ASGD_MODEL_LAYERS_LAYER_H_
