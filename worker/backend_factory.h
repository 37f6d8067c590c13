// CreateBackend: picks the DnnBackend named on a command line.
//
//   "cpu"   the OpenBLAS backend (CreateCpuDnn), always available.
//   "cuda"  the CUDA backend (CreateCudaDnn); kUnavailable, with the reason,
//           when the machine has no usable CUDA device.
//   "auto"  CUDA when a device is present, otherwise the CPU backend. Only the
//           absence of a device (kUnavailable) falls back; any other CUDA
//           failure (out of memory, a cuBLAS error) is returned, so that a
//           broken GPU setup is not silently replaced by a slower backend.
//
// `*note` (when `note` is not null) receives one line for the log saying what
// was chosen and why, e.g. "no CUDA device: cudaGetDeviceCount returned
// cudaErrorNoDevice (no CUDA-capable device is detected); falling back to the
// CPU backend". It is set on success and cleared on error.
//
//   std::string note;
//   auto dnn = CreateBackend("auto", spec, /*max_batch=*/256, &note);
//   if (!dnn.ok()) return dnn.status();
//   std::fprintf(stderr, "%s\n", note.c_str());
//
// Thread-safety: thread-safe; the returned backend is for one thread.
#ifndef ASGD_WORKER_BACKEND_FACTORY_H_
#define ASGD_WORKER_BACKEND_FACTORY_H_

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/dnn_spec.h"
#include "worker/cuda_options.h"
#include "worker/dnn.h"

namespace asgd {

// The accepted names, for flag help: "cpu, cuda, auto".
inline constexpr char kBackendChoices[] = "cpu, cuda, auto";

// InvalidArgument for an unknown name (the message lists the choices), a bad
// spec or max_batch < 1; otherwise the errors of CreateCpuDnn/CreateCudaDnn
// as described above. `cuda_options` applies to "cuda" and "auto".
absl::StatusOr<std::unique_ptr<DnnBackend>> CreateBackend(
    absl::string_view name, const DnnSpec& spec, int max_batch,
    std::string* note, const CudaDnnOptions& cuda_options = {});

// OK when "cuda" would find a backend: this build has the CUDA plugin, it
// loads, and a device is usable. Otherwise kUnavailable with the reason
// (e.g. "this asgd was built without CUDA support ..." or "no CUDA device:
// ..."). Loads the plugin (and with it cuBLAS) when the build has one.
absl::Status CudaBackendStatus();

}  // namespace asgd

#endif  // ASGD_WORKER_BACKEND_FACTORY_H_
