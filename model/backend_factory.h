// CreateBackend: picks the ModelBackend named on a command line.
//
//   "cpu"   the OpenBLAS backend (CreateCpuBackend), always available.
//   "cuda"  the CUDA backend (CreateCudaBackend); kUnavailable, with the reason,
//           when the machine has no usable CUDA device.
//   "auto"  CUDA when a device is present, otherwise the CPU backend. Only the
//           absence of a device or of CUDA support in this build
//           (kUnavailable), or a model the CUDA backend does not implement
//           (kUnimplemented; today it implements every layer kind), falls
//           back; any other CUDA failure (out of memory, a cuBLAS error) is
//           returned, so that a broken GPU setup is not silently replaced by
//           a slower backend.
//
// `*note` (when `note` is not null) receives one line for the log saying what
// was chosen and why, e.g. "no CUDA device: cudaGetDeviceCount returned
// cudaErrorNoDevice (no CUDA-capable device is detected); falling back to the
// CPU backend". It is set on success and cleared on error.
//
//   std::string note;
//   auto dnn = CreateBackend("auto", spec, /*max_rows=*/256, &note);
//   if (!dnn.ok()) return dnn.status();
//   std::fprintf(stderr, "%s\n", note.c_str());
//
// Thread-safety: thread-safe; the returned backend is for one thread.
#ifndef ASGD_MODEL_BACKEND_FACTORY_H_
#define ASGD_MODEL_BACKEND_FACTORY_H_

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "model/model_spec.h"
#include "model/cuda/cuda_options.h"
#include "model/backend.h"
#include "model/layer_range.h"

namespace asgd {

// The accepted names, for flag help: "cpu, cuda, auto".
inline constexpr char kBackendChoices[] = "cpu, cuda, auto";

// InvalidArgument for an unknown name (the message lists the choices), a bad
// spec or max_rows < 1; otherwise the errors of CreateCpuBackend and
// CreateCudaBackend as described above (a model the CUDA backend does not
// implement is kUnimplemented, and "auto" then falls back to the CPU too).
// `cuda_options` applies to "cuda" and "auto".
absl::StatusOr<std::unique_ptr<ModelBackend>> CreateBackend(
    absl::string_view name, const ModelSpec& spec, int max_rows,
    std::string* note, const CudaOptions& cuda_options = {});

// How a pipeline stage makes its layer ranges (model/layer_range.h) on the
// backend `name`, chosen as CreateBackend chooses: "cpu" the CPU's; "cuda"
// the CUDA plugin's on cuda_options.device (kUnavailable, with the reason,
// when this build, the plugin or the machine has none); "auto" CUDA when
// CudaBackendStatus() is OK, else the CPU's. *note (may be null) says
// which, and for "auto" on the CPU why. InvalidArgument for an unknown name.
// A CUDA range refuses a layer kind the plugin does not compute when made.
absl::StatusOr<LayerRangeFactory> LayerRangeFactoryFor(
    absl::string_view name, const CudaOptions& cuda_options,
    std::string* note);

// OK when "cuda" would find a backend: this build has the CUDA plugin, it
// loads, and a device is usable. Otherwise kUnavailable with the reason
// (e.g. "this asgd was built without CUDA support ..." or "no CUDA device:
// ..."). Loads the plugin (and with it cuBLAS) when the build has one.
absl::Status CudaBackendStatus();

// Where the CUDA backend's training step spends its device time, layer by
// layer and step by step (the plugin's ProfileCudaLayers,
// model/cuda/cuda_profile.h): a markdown table. kUnavailable as
// CudaBackendStatus(); InvalidArgument for a bad spec, options or count.
absl::StatusOr<std::string> CudaLayerProfile(const ModelSpec& spec,
                                             int sequences, int steps,
                                             const CudaOptions& cuda_options,
                                             int iters);

}  // namespace asgd

#endif  // ASGD_MODEL_BACKEND_FACTORY_H_
