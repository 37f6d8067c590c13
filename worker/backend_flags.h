// asgd_worker's backend flags, defined once here: --backend, --cuda_device,
// --cuda_math. The whole-model backend (model/backend_factory.h
// CreateBackend) and a pipeline stage's layer ranges (LayerRangeFactoryFor)
// are made from them.
//
// Thread-safety: reads flags; call after they are parsed.
#ifndef ASGD_WORKER_BACKEND_FLAGS_H_
#define ASGD_WORKER_BACKEND_FLAGS_H_

#include <string>

#include "absl/status/statusor.h"
#include "model/cuda/cuda_options.h"

namespace asgd {

// --backend (cpu, cuda or auto; checked where it is used).
std::string BackendFromFlags();

// --cuda_device and --cuda_math; InvalidArgument for an unknown math mode.
absl::StatusOr<CudaOptions> CudaOptionsFromFlags();

}  // namespace asgd

#endif  // ASGD_WORKER_BACKEND_FLAGS_H_
