#include "model/batch_check.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"

namespace asgd {

absl::Status CheckBatch(const ModelSpec& spec, int max_rows,
                        int64_t num_params, absl::Span<const float> params,
                        const Batch& batch) {
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
  return absl::OkStatus();
}

absl::Status CheckGradientCall(const ModelSpec& spec, int max_rows,
                               int64_t num_params,
                               absl::Span<const float> params,
                               const Batch& batch, absl::Span<float> grad) {
  if (absl::Status s = CheckBatch(spec, max_rows, num_params, params, batch);
      !s.ok()) {
    return s;
  }
  if (static_cast<int64_t>(grad.size()) != num_params) {
    return absl::InvalidArgumentError(absl::StrCat(
        "gradient buffer has ", grad.size(), " floats, want ", num_params));
  }
  const int64_t rows = batch.rows();
  const int64_t heads = spec.output_frames;
  if (static_cast<int64_t>(batch.labels.size()) != rows * heads) {
    return absl::InvalidArgumentError(
        absl::StrCat("batch has ", batch.labels.size(), " labels, want ",
                     rows * heads, " (", rows, " rows x ", heads,
                     " output frames)"));
  }
  for (int64_t i = 0; i < rows * heads; ++i) {
    const int32_t label = batch.labels[i];
    if (label != kNoLabel && (label < 0 || label >= spec.num_classes)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "label ", label, " at row ", i / heads,
          heads > 1 ? absl::StrCat(" head ", i % heads) : "", " outside [0, ",
          spec.num_classes, ")"));
    }
  }
  if (batch.teacher.empty()) return absl::OkStatus();
  if (static_cast<int64_t>(batch.teacher.size()) != rows * spec.output_dim()) {
    return absl::InvalidArgumentError(
        absl::StrCat("teacher log-posteriors of ", batch.teacher.size(),
                     " values, want ", rows * spec.output_dim()));
  }
  if (!(batch.teacher_weight >= 0.0f && batch.teacher_weight <= 1.0f) ||
      !(batch.temperature > 0.0f && batch.temperature <= 100.0f)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "teacher weight ", batch.teacher_weight, " (want [0, 1]) and "
        "temperature ", batch.temperature, " (want (0, 100])"));
  }
  for (float v : batch.teacher) {
    if (!std::isfinite(v)) {
      return absl::InvalidArgumentError(
          "teacher log-posteriors hold NaN or Inf");
    }
  }
  return absl::OkStatus();
}

absl::Status CheckOutputCall(const ModelSpec& spec, int max_rows,
                             int64_t num_params, absl::Span<const float> params,
                             const Batch& batch, int64_t output_size,
                             int per_row) {
  if (absl::Status s = CheckBatch(spec, max_rows, num_params, params, batch);
      !s.ok()) {
    return s;
  }
  const int64_t want = int64_t{batch.rows()} * per_row;
  if (output_size != want) {
    return absl::InvalidArgumentError(absl::StrCat(
        "output has ", output_size, " values, want ", want));
  }
  return absl::OkStatus();
}

void LogSoftmaxRow(const float* logits, int c, float* out) {
  const float mx = *std::max_element(logits, logits + c);
  double sum = 0;
  for (int k = 0; k < c; ++k) sum += std::exp(double{logits[k]} - mx);
  const float log_sum = static_cast<float>(std::log(sum)) + mx;
  for (int k = 0; k < c; ++k) out[k] = logits[k] - log_sum;
}

}  // namespace asgd
