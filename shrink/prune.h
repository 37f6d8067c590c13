// Magnitude pruning of a trained model, as model data: the smallest weights
// of the chosen tensors are set to 0 and the tensors named as pruned
// (model/prune_mask.h), so that the servers keep them at 0 while the model
// is retrained (asgd_server --init_model) and a decoder may store them
// sparsely.
//
// Which weights: the weight tensors (every tensor but the biases) of the
// model, or those named. Global: the `sparsity` share of all their weights
// with the smallest |w| (one threshold for the whole model, so layers with
// many small weights lose more); per tensor: that share of each. Weights
// already 0 in a pruned tensor stay pruned and count toward the share.
// Exactly floor(sparsity * n) weights end pruned (of n considered), ties at
// the threshold broken by position.
//
// Thread-safety: a pure function.
#ifndef ASGD_SHRINK_PRUNE_H_
#define ASGD_SHRINK_PRUNE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "model/model_file.h"

namespace asgd {

struct PruneOptions {
  double sparsity = 0;      // in [0, 1)
  bool per_tensor = false;  // false: one threshold over every tensor
  std::vector<std::string> tensors;  // empty: every weight tensor
};

struct PrunedTensor {
  std::string name;
  int64_t size = 0;
  int64_t pruned = 0;  // zeros after pruning
};

struct PruneResult {
  SavedModel model;
  std::vector<PrunedTensor> tensors;  // the pruned ones, in model order
  int64_t params = 0;                 // in the whole model
  int64_t pruned = 0;                 // in the whole model
};

// InvalidArgument for a sparsity outside [0, 1), a tensor that is not in
// the model or is listed twice, or a model whose params do not match its
// spec.
absl::StatusOr<PruneResult> PruneByMagnitude(const SavedModel& model,
                                             const PruneOptions& options);

}  // namespace asgd

#endif  // ASGD_SHRINK_PRUNE_H_
