// The argument checks every ModelBackend makes before it computes, in one
// place so that every backend gives the same error for the same mistake.
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

// InvalidArgument unless `params` has num_params floats, the batch has 1 to
// max_rows rows (steps == 1 for a frame model), inputs of rows × input_dim
// floats, and, with check_labels, rows labels each in [0, num_classes) or
// kNoLabel.
absl::Status CheckBatch(const ModelSpec& spec, int max_rows,
                        int64_t num_params, absl::Span<const float> params,
                        const Batch& batch, bool check_labels);

}  // namespace asgd

#endif  // ASGD_MODEL_BATCH_CHECK_H_
