// A saved model: its spec (the layer graph) and weights in one file.
//
// Format: text header lines, then raw little-endian float32 data:
//   asgd-model 2
//   spec feature_dim: 40 context: 5 layers { dense { units: 512 } } ...
//   tensor layer0/weight 512 440
//   tensor layer0/bias 512
//   ...
//   pruned layer0/weight      (none, one or more: the pruned tensors)
//   data <number of floats>
//   <number of floats * 4 bytes>
// The spec line is the one-line protobuf text form of asgd.v1.ModelSpec
// (model/model_spec_proto.h); the tensor lines repeat ModelTensors(spec) for
// readers and are checked against it. A "pruned" line names a tensor whose
// zeros are pruned weights that training keeps at 0 (model/prune_mask.h);
// a file without one is dense (and readable by earlier asgd versions). Files of the earlier format
// ("asgd-model 1": an activation line and DNN tensors) load as the DNN they
// describe, with 11 stacked frames when the input size allows.
//
// Thread-safety: reentrant functions.
#ifndef ASGD_MODEL_MODEL_FILE_H_
#define ASGD_MODEL_MODEL_FILE_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "model/model_spec.h"

namespace asgd {

struct SavedModel {
  ModelSpec spec;
  std::vector<float> params;
  std::vector<std::string> pruned;  // pruned tensors (model/prune_mask.h)
};

// Writes atomically (temporary file, then rename). InvalidArgument when the
// parameter count does not match the spec, a value is not finite, or a
// pruned tensor is not in the model (CheckPrunedTensors).
absl::Status SaveModel(const std::string& path, const ModelSpec& spec,
                       absl::Span<const float> params,
                       absl::Span<const std::string> pruned = {});

// InvalidArgument naming the problem for a malformed, truncated or
// inconsistent file, or one holding a non-finite value; NotFound when it
// does not exist.
absl::StatusOr<SavedModel> LoadModel(const std::string& path);

}  // namespace asgd

#endif  // ASGD_MODEL_MODEL_FILE_H_
