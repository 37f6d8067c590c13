// Loads the CUDA backend plugin (libasgd_cuda.so, see cuda_plugin.h): first
// next to the running executable, then in its Bazel runfiles, then through
// the dynamic linker's search path (LD_LIBRARY_PATH, ...). The library stays
// loaded for the life of the process.
//
// The plugin exists only in builds that found a CUDA toolkit
// (//third_party/cuda). In a build without one, CudaBuildStatus() and
// LoadCudaPlugin() are kUnavailable with a message that says so and how to
// get a build with CUDA, e.g.
//   this asgd was built without CUDA support (no CUDA toolkit found at build
//   time: ...). To use --backend=cuda, install a CUDA toolkit with cuBLAS
//   and rebuild: ...
//
// Thread-safety: thread-safe; the first call loads, later calls return the
// same result.
#ifndef ASGD_MODEL_CUDA_CUDA_LOADER_H_
#define ASGD_MODEL_CUDA_CUDA_LOADER_H_

#include "absl/status/statusor.h"
#include "model/cuda/cuda_plugin.h"

namespace asgd {

// OK when this build has the CUDA plugin; otherwise kUnavailable with the
// message above. Loads nothing (cheap, safe before the metrics endpoint).
absl::Status CudaBuildStatus();

// Unavailable, saying where it looked and why, when this build has no CUDA
// support, or the plugin cannot be loaded or was built for another ABI
// version.
absl::StatusOr<const CudaPluginApi*> LoadCudaPlugin();

}  // namespace asgd

#endif  // ASGD_MODEL_CUDA_CUDA_LOADER_H_
