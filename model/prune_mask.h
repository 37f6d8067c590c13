// A pruned model's mask, as model data.
//
// A saved model (model_file.h) may name some of its tensors as pruned. In a
// pruned tensor every weight that is exactly 0 is pruned: training keeps it
// at 0. The servers give a pruned weight gradient 0 whatever a worker pushed
// (UpdateContext::keep, step/optimizer.h), in every push encoding, so it
// stays exactly 0; the mask is thus the zeros of the pruned tensors of the
// model the servers started from (asgd_server --init_model), and a worker's
// --save_model names the same tensors (the servers publish them as the
// model attribute kPrunedTensorsAttribute). The other tensors are dense.
//
// Thread-safety: pure functions.
#ifndef ASGD_MODEL_PRUNE_MASK_H_
#define ASGD_MODEL_PRUNE_MASK_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "model/model_spec.h"

namespace asgd {

// The model attribute (DescribeModel) naming the pruned tensors,
// comma-separated.
inline constexpr char kPrunedTensorsAttribute[] = "pruned_tensors";

// InvalidArgument unless every name is one of ModelTensors(spec), listed
// once. The spec must be valid.
absl::Status CheckPrunedTensors(const ModelSpec& spec,
                                absl::Span<const std::string> pruned);

// Over the flat model (params: ModelParamCount(spec) values): 0 for a
// pruned weight (exactly 0 in a tensor named in `pruned`), 1 for every
// other. The names must pass CheckPrunedTensors.
std::vector<uint8_t> KeepMask(const ModelSpec& spec,
                              absl::Span<const float> params,
                              absl::Span<const std::string> pruned);

// Pruned weights in a mask (its zeros).
int64_t CountPruned(absl::Span<const uint8_t> keep);

// A short hex digest of the mask (FNV-1a, 64 bits), part of the pool's
// model identity (the layout fingerprint's model id, which workers check
// and every checkpoint carries), so that a checkpoint is restored only
// under its own mask. The servers publish it as kPruneMaskAttribute.
inline constexpr char kPruneMaskAttribute[] = "prune_mask";
std::string KeepMaskDigest(absl::Span<const uint8_t> keep);

// The model id of a model whose spec digest is `spec_id`
// (ModelSpecDigest) and whose mask digest is `mask_digest` (empty: dense).
std::string ModelIdWithMask(const std::string& spec_id,
                            absl::string_view mask_digest);

// The attribute's value for `pruned`, and the names in an attribute map
// (none when it has no such attribute).
std::string JoinPrunedTensors(absl::Span<const std::string> pruned);
std::vector<std::string> PrunedTensorsOf(
    const std::map<std::string, std::string>& attributes);

}  // namespace asgd

#endif  // ASGD_MODEL_PRUNE_MASK_H_
