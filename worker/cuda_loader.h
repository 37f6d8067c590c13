// Loads the CUDA backend plugin (libasgd_cuda.so, see cuda_plugin.h): first
// next to the running executable, then in its Bazel runfiles, then through
// the dynamic linker's search path (LD_LIBRARY_PATH, ...). The library stays loaded for the life of the
// process.
//
// Thread-safety: thread-safe; the first call loads, later calls return the
// same result.
#ifndef ASGD_WORKER_CUDA_LOADER_H_
#define ASGD_WORKER_CUDA_LOADER_H_

#include "absl/status/statusor.h"
#include "worker/cuda_plugin.h"

namespace asgd {

// Unavailable, saying where it looked and why, when the plugin cannot be
// loaded or was built for another ABI version.
absl::StatusOr<const CudaPluginApi*> LoadCudaPlugin();

}  // namespace asgd

#endif  // ASGD_WORKER_CUDA_LOADER_H_
