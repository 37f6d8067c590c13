// The CPU's LayerRange (model/layer_range.h): the CPU layers of
// model/layers/ in order, with one minibatch's activations in host memory.
// Every partition of a model into such ranges, run in order, computes
// exactly the CPU backend's loss and gradient, bit for bit.
//
// Thread-safety: as LayerRange (one thread at a time per range).
#ifndef ASGD_MODEL_CPU_LAYER_RANGE_H_
#define ASGD_MODEL_CPU_LAYER_RANGE_H_

#include <memory>

#include "absl/status/statusor.h"
#include "model/layer_range.h"
#include "model/model_spec.h"

namespace asgd {

// InvalidArgument as CheckLayerRange (model/layer_range.h). A
// LayerRangeFactory.
absl::StatusOr<std::unique_ptr<LayerRange>> CreateCpuLayerRange(
    const ModelSpec& spec, int first, int last, int max_rows);

}  // namespace asgd

#endif  // ASGD_MODEL_CPU_LAYER_RANGE_H_
