// LayerRange: the layers [first, last) of a model on the CPU, the math of
// one pipeline stage (pipelined back-propagation, worker/pipeline/). Layer
// i < spec.layers.size() is hidden layer i; layer spec.layers.size() is the
// output layer, and the range that holds it also computes the loss
// (model/softmax_loss.h). Running every range of a partition in order,
// forward from the first and backward from the last, performs exactly the
// CPU backend's operations in its order: the same loss and gradient, bit for
// bit (layer_range_test).
//
//   auto stage = LayerRange::Create(spec, /*first=*/1, /*last=*/3, max_rows);
//   stage->Forward(params, in, sequences, steps);        // -> stage->out()
//   ... the next stage, ... the loss on the last: Loss(batch, params, in) ...
//   stage->Backward(params, in, dout, sequences, steps, dparams, din);
//
// `params` and `dparams` are this range's part of the flat model
// (param_count() floats starting at param_offset()); `in` has rows ×
// in_dim() floats, out() rows × out_dim(). Backward must follow the Forward
// of the same minibatch with the same params and in (the layers keep their
// activations in their own scratch): a pipeline that holds several
// minibatches in flight keeps one LayerRange per minibatch in flight.
//
// Thread-safety: one thread at a time per LayerRange.
#ifndef ASGD_MODEL_LAYER_RANGE_H_
#define ASGD_MODEL_LAYER_RANGE_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "model/backend.h"
#include "model/layers/layer.h"
#include "model/model_spec.h"
#include "model/softmax_loss.h"

namespace asgd {

class LayerRange {
 public:
  // InvalidArgument for an invalid spec, max_rows < 1 or a range that is
  // empty or outside [0, spec.layers.size() + 1).
  static absl::StatusOr<std::unique_ptr<LayerRange>> Create(
      const ModelSpec& spec, int first, int last, int max_rows);

  int first() const { return first_; }
  int last() const { return last_; }
  // Whether the range ends with the output layer (and computes the loss).
  bool has_loss() const { return has_loss_; }
  int64_t param_offset() const { return param_offset_; }
  int64_t param_count() const { return param_count_; }
  int in_dim() const { return layers_.front()->in_shape().dim(); }
  int out_dim() const { return layers_.back()->out_shape().dim(); }

  // Runs the layers on `in` (sequences × steps rows, at most max_rows).
  void Forward(const float* params, const float* in, int sequences, int steps);
  // The last Forward's output (with has_loss(), the logits until Loss()
  // turns them into probabilities).
  const float* out() const { return acts_.back().data(); }

  // has_loss() only, after Forward on batch.inputs-shaped rows: the loss
  // of `batch`'s labels (and teacher), whose gradient Backward then starts
  // from (dout null).
  BatchResult Loss(const Batch& batch);

  // Back through the layers from `dout` (rows × out_dim(); null after
  // Loss): writes all of `dparams` and, unless `din` is null (the first
  // stage needs none), all of `din` (rows × in_dim()).
  void Backward(const float* params, const float* in, const float* dout,
                int sequences, int steps, float* dparams, float* din);

 private:
  LayerRange(const ModelSpec& spec, int first, int last, int max_rows,
             std::vector<std::unique_ptr<Layer>> layers);

  const int first_, last_;
  const bool has_loss_;
  int64_t param_offset_ = 0, param_count_ = 0;
  std::vector<std::unique_ptr<Layer>> layers_;
  std::vector<int64_t> offsets_;          // of each layer, within the range
  std::vector<std::vector<float>> acts_;  // per layer [max_rows, out]
  std::vector<float> delta_, delta_prev_;
  SoftmaxLoss loss_;
};

}  // namespace asgd

#endif  // ASGD_MODEL_LAYER_RANGE_H_
