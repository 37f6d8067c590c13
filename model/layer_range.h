// LayerRange: the layers [first, last) of a model, the math of one pipeline
// stage (pipelined back-propagation, worker/pipeline/). Layer
// i < spec.layers.size() is hidden layer i; layer spec.layers.size() is the
// output layer, and the range that holds it also computes the loss
// (model/softmax_loss.h, on the host for every implementation).
//
// Implementations: the CPU's (model/cpu_layer_range.h) and the CUDA
// plugin's (model/cuda/cuda_layer_range.h), each a LayerRangeFactory;
// model/backend_factory.h picks one by the backend's name. Both take and
// return host memory; the CUDA range copies the stage's weights, input and
// output gradient to its device and the results back.
//
// Running every CPU range of a partition in order, forward from the first
// and backward from the last, performs exactly the CPU backend's operations
// in its order: the same loss and gradient, bit for bit (layer_range_test).
// A CUDA range computes the CUDA backend's operations (cuda_layer_range_test
// compares it with the CPU's).
//
//   auto stage = CreateCpuLayerRange(spec, /*first=*/1, /*last=*/3, max_rows);
//   RETURN_IF_ERROR(stage->Forward(params, in, sequences, steps));
//   ... the next stage, ... the loss on the last: Loss(batch) ...
//   RETURN_IF_ERROR(stage->Backward(params, in, dout, sequences, steps,
//                                   dparams, din));
//
// `params` and `dparams` are this range's part of the flat model
// (param_count() floats starting at param_offset()); `in` has rows ×
// in_dim() floats, out() rows × out_dim(). Backward must follow the Forward
// of the same minibatch with the same params and in (the layers keep their
// activations in their own scratch): a pipeline that holds several
// minibatches in flight keeps one LayerRange per minibatch in flight.
// Rows (sequences × steps) are in [1, max_rows]; the caller checks this.
//
// Thread-safety: one thread at a time per LayerRange.
#ifndef ASGD_MODEL_LAYER_RANGE_H_
#define ASGD_MODEL_LAYER_RANGE_H_

#include <cstdint>
#include <functional>
#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "model/backend.h"
#include "model/model_spec.h"

namespace asgd {

class LayerRange {
 public:
  virtual ~LayerRange() = default;

  int first() const { return first_; }
  int last() const { return last_; }
  // Whether the range ends with the output layer (and computes the loss).
  bool has_loss() const { return has_loss_; }
  int64_t param_offset() const { return param_offset_; }
  int64_t param_count() const { return param_count_; }
  int in_dim() const { return in_dim_; }
  int out_dim() const { return out_dim_; }

  // Runs the layers on `in` (sequences × steps rows). A device range's
  // errors (a launch or copy that failed); the CPU's is always OK.
  virtual absl::Status Forward(const float* params, const float* in,
                               int sequences, int steps) = 0;
  // The last Forward's output, in host memory (with has_loss(), the logits
  // until Loss() turns them into probabilities).
  virtual const float* out() const = 0;

  // has_loss() only, after Forward on batch.inputs-shaped rows: the loss
  // of `batch`'s labels (and teacher), whose gradient Backward then starts
  // from (dout null).
  virtual BatchResult Loss(const Batch& batch) = 0;

  // Back through the layers from `dout` (rows × out_dim(); null after
  // Loss): writes all of `dparams` and, unless `din` is null (the first
  // stage needs none), all of `din` (rows × in_dim()). Errors as Forward.
  virtual absl::Status Backward(const float* params, const float* in,
                                const float* dout, int sequences, int steps,
                                float* dparams, float* din) = 0;

 protected:
  // For a range the caller validated (CheckLayerRange).
  LayerRange(const ModelSpec& spec, int first, int last);

 private:
  const int first_, last_;
  const bool has_loss_;
  const int64_t param_offset_, param_count_;
  const int in_dim_, out_dim_;
};

// OK for a valid spec, a non-empty range inside [0, spec.layers.size() + 1)
// and max_rows >= 1; InvalidArgument naming the problem otherwise. Every
// implementation checks this first.
absl::Status CheckLayerRange(const ModelSpec& spec, int first, int last,
                             int max_rows);

// How a stage makes its ranges (the CPU's: CreateCpuLayerRange; one by
// backend name: model/backend_factory.h). Called on the stage's thread.
using LayerRangeFactory =
    std::function<absl::StatusOr<std::unique_ptr<LayerRange>>(
        const ModelSpec& spec, int first, int last, int max_rows)>;

}  // namespace asgd

#endif  // ASGD_MODEL_LAYER_RANGE_H_
