// The argument checks every ModelBackend makes before it computes, in one
// place so that every backend gives the same error for the same mistake;
// and the host-side log-softmax they share.
//
// Thread-safety: pure function.
#ifndef ASGD_MODEL_BATCH_CHECK_H_
#define ASGD_MODEL_BATCH_CHECK_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "model/backend.h"
#include "model/model_spec.h"

namespace asgd {

// What every call takes: InvalidArgument unless `params` has num_params
// floats, the batch has 1 to max_rows rows (steps == 1 for a frame model)
// and inputs of rows × input_dim floats.
absl::Status CheckBatch(const ModelSpec& spec, int max_rows,
                        int64_t num_params, absl::Span<const float> params,
                        const Batch& batch);

// CheckBatch, and rows × output_frames labels each in [0, num_classes) or
// kNoLabel, and a gradient buffer of num_params floats (ComputeGradient);
// with a teacher, rows × output_dim() finite log-posteriors, a weight in
// [0, 1] and a temperature in (0, 100].
absl::Status CheckGradientCall(const ModelSpec& spec, int max_rows,
                               int64_t num_params,
                               absl::Span<const float> params,
                               const Batch& batch, absl::Span<float> grad);

// CheckBatch, and an output of `per_row` values per row (LogPosteriors:
// output_dim(); Predict: output_frames).
absl::Status CheckOutputCall(const ModelSpec& spec, int max_rows,
                             int64_t num_params, absl::Span<const float> params,
                             const Batch& batch, int64_t output_size,
                             int per_row);

// out[k] = logits[k] - log(sum_j exp(logits[j])) for one row of c values,
// the sum in double (the backends' LogPosteriors).
void LogSoftmaxRow(const float* logits, int c, float* out);

}  // namespace asgd

#endif  // ASGD_MODEL_BATCH_CHECK_H_
