#include "worker/backend_factory.h"

#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "worker/cuda_loader.h"

namespace asgd {
namespace {

absl::StatusOr<std::unique_ptr<DnnBackend>> CreateCuda(
    const DnnSpec& spec, int max_batch, const CudaDnnOptions& options,
    std::string* note) {
  auto plugin = LoadCudaPlugin();
  if (!plugin.ok()) return plugin.status();
  auto dnn = (*plugin)->create(spec, max_batch, options);
  if (!dnn.ok()) return dnn.status();
  absl::StatusOr<std::string> device = (*plugin)->device_name(options.device);
  *note = absl::StrCat("using the CUDA backend on device ", options.device,
                       " (", device.ok() ? *device : "unknown name", ", ",
                       CudaMathModeName(options.math), " GEMMs)");
  return dnn;
}

absl::StatusOr<std::unique_ptr<DnnBackend>> Create(
    absl::string_view name, const DnnSpec& spec, int max_batch,
    const CudaDnnOptions& cuda_options, std::string* note) {
  // A bad spec is the same error whichever backend is asked for, and whether
  // or not this build or machine has CUDA.
  ASGD_RETURN_IF_ERROR(ValidateDnnSpec(spec));
  if (max_batch < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_batch must be >= 1, got ", max_batch));
  }
  if (name == "cpu") {
    auto dnn = CreateCpuDnn(spec, max_batch);
    if (dnn.ok()) *note = "using the CPU backend";
    return dnn;
  }
  if (name == "cuda") {
    auto dnn = CreateCuda(spec, max_batch, cuda_options, note);
    if (!dnn.ok()) {
      return absl::Status(dnn.status().code(),
                          absl::StrCat("cannot use the cuda backend: ",
                                       dnn.status().message()));
    }
    return dnn;
  }
  if (name == "auto") {
    // No CUDA build, no plugin or no device is Unavailable: fall back to
    // the CPU. Any other CUDA failure is returned.
    auto dnn = CreateCuda(spec, max_batch, cuda_options, note);
    if (dnn.ok() || dnn.status().code() != absl::StatusCode::kUnavailable) {
      return dnn;
    }
    auto cpu = CreateCpuDnn(spec, max_batch);
    if (cpu.ok()) {
      *note = absl::StrCat(dnn.status().message(),
                           "; falling back to the CPU backend");
    }
    return cpu;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown backend \"", name, "\"; choose one of ", kBackendChoices));
}

}  // namespace

absl::Status CudaBackendStatus() {
  auto plugin = LoadCudaPlugin();
  if (!plugin.ok()) return plugin.status();
  return (*plugin)->device_status();
}

absl::StatusOr<std::unique_ptr<DnnBackend>> CreateBackend(
    absl::string_view name, const DnnSpec& spec, int max_batch,
    std::string* note, const CudaDnnOptions& cuda_options) {
  std::string local_note;
  auto dnn = Create(name, spec, max_batch, cuda_options, &local_note);
  if (note != nullptr) *note = dnn.ok() ? std::move(local_note) : "";
  return dnn;
}

}  // namespace asgd
