// The CPU ModelBackend: runs the layers of model/layers/ in order (OpenBLAS
// GEMMs), then a softmax with cross-entropy over the labelled rows. See
// model/backend.h for the interface.
//
// Thread-safety: as ModelBackend (one instance per thread).
#ifndef ASGD_MODEL_CPU_BACKEND_H_
#define ASGD_MODEL_CPU_BACKEND_H_

#include <memory>

#include "absl/status/statusor.h"
#include "model/backend.h"
#include "model/model_spec.h"

namespace asgd {

// Buffers for batches of up to `max_rows` rows (sequences × steps), all
// allocated here. InvalidArgument for an invalid spec or max_rows < 1.
absl::StatusOr<std::unique_ptr<ModelBackend>> CreateCpuBackend(
    const ModelSpec& spec, int max_rows);

}  // namespace asgd

#endif  // ASGD_MODEL_CPU_BACKEND_H_
