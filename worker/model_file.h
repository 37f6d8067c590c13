// A saved model: the DNN's tensors and weights in one file.
//
// Format: text header lines, then raw little-endian float32 data:
//   asgd-model 1
//   activation relu
//   tensor layer0/weight 512 440
//   tensor layer0/bias 512
//   ...
//   data <number of floats>
//   <number of floats * 4 bytes>
//
// Thread-safety: reentrant functions.
#ifndef ASGD_WORKER_MODEL_FILE_H_
#define ASGD_WORKER_MODEL_FILE_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "common/dnn_spec.h"

namespace asgd {

struct SavedModel {
  DnnSpec spec;
  std::vector<float> params;
};

// Writes atomically (temporary file, then rename).
absl::Status SaveModel(const std::string& path, const DnnSpec& spec,
                       absl::Span<const float> params);

// InvalidArgument naming the problem for a malformed, truncated or
// inconsistent file; NotFound when it does not exist.
absl::StatusOr<SavedModel> LoadModel(const std::string& path);

}  // namespace asgd

#endif  // ASGD_WORKER_MODEL_FILE_H_
