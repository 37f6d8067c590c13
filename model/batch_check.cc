#include "model/batch_check.h"

#include "absl/strings/str_cat.h"

namespace asgd {

absl::Status CheckBatch(const ModelSpec& spec, int max_rows,
                        int64_t num_params, absl::Span<const float> params,
                        const Batch& batch, bool check_labels) {
  if (static_cast<int64_t>(params.size()) != num_params) {
    return absl::InvalidArgumentError(absl::StrCat(
        "model has ", params.size(), " parameters, want ", num_params));
  }
  if (batch.sequences < 1 || batch.steps < 1 ||
      int64_t{batch.sequences} * batch.steps > max_rows) {
    return absl::InvalidArgumentError(
        absl::StrCat("batch of ", batch.sequences, " x ", batch.steps,
                     " rows outside [1, ", max_rows, "]"));
  }
  if (batch.steps > 1 && !spec.is_sequence()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "a frame model takes batches of single rows, not ", batch.steps,
        " steps"));
  }
  const int64_t rows = batch.rows();
  if (static_cast<int64_t>(batch.inputs.size()) != rows * spec.input_dim()) {
    return absl::InvalidArgumentError(
        absl::StrCat("inputs have ", batch.inputs.size(), " floats, want ",
                     rows, " x ", spec.input_dim()));
  }
  if (!check_labels) return absl::OkStatus();
  if (static_cast<int64_t>(batch.labels.size()) != rows) {
    return absl::InvalidArgumentError(absl::StrCat(
        "batch has ", batch.labels.size(), " labels, want ", rows));
  }
  for (int64_t i = 0; i < rows; ++i) {
    const int32_t label = batch.labels[i];
    if (label != kNoLabel && (label < 0 || label >= spec.num_classes)) {
      return absl::InvalidArgumentError(
          absl::StrCat("label ", label, " at row ", i, " outside [0, ",
                       spec.num_classes, ")"));
    }
  }
  return absl::OkStatus();
}

}  // namespace asgd
