#include "model/backend_factory.h"

#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "model/cpu_backend.h"
#include "model/cpu_layer_range.h"
#include "model/cuda/cuda_loader.h"

namespace asgd {
namespace {

absl::StatusOr<std::unique_ptr<ModelBackend>> CreateCuda(
    const ModelSpec& spec, int max_rows, const CudaOptions& options,
    std::string* note) {
  auto plugin = LoadCudaPlugin();
  if (!plugin.ok()) return plugin.status();
  auto dnn = (*plugin)->create(spec, max_rows, options);
  if (!dnn.ok()) return dnn.status();
  absl::StatusOr<std::string> device = (*plugin)->device_name(options.device);
  *note = absl::StrCat("using the CUDA backend on device ", options.device,
                       " (", device.ok() ? *device : "unknown name", ", ",
                       CudaMathModeName(options.math), " GEMMs)");
  return dnn;
}

absl::StatusOr<std::unique_ptr<ModelBackend>> Create(
    absl::string_view name, const ModelSpec& spec, int max_rows,
    const CudaOptions& cuda_options, std::string* note) {
  // A bad spec is the same error whichever backend is asked for, and whether
  // or not this build or machine has CUDA.
  ASGD_RETURN_IF_ERROR(ValidateModelSpec(spec));
  if (max_rows < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_rows must be >= 1, got ", max_rows));
  }
  if (name == "cpu") {
    auto dnn = CreateCpuBackend(spec, max_rows);
    if (dnn.ok()) *note = "using the CPU backend";
    return dnn;
  }
  if (name == "cuda") {
    auto dnn = CreateCuda(spec, max_rows, cuda_options, note);
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
    auto dnn = CreateCuda(spec, max_rows, cuda_options, note);
    if (dnn.ok() || (dnn.status().code() != absl::StatusCode::kUnavailable &&
                     dnn.status().code() != absl::StatusCode::kUnimplemented)) {
      return dnn;
    }
    auto cpu = CreateCpuBackend(spec, max_rows);
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

absl::StatusOr<std::string> CudaLayerProfile(const ModelSpec& spec,
                                             int sequences, int steps,
                                             const CudaOptions& cuda_options,
                                             int iters) {
  ASGD_ASSIGN_OR_RETURN(const CudaPluginApi* plugin, LoadCudaPlugin());
  ASGD_RETURN_IF_ERROR(plugin->device_status());
  return plugin->profile_layers(spec, sequences, steps, cuda_options, iters);
}

absl::StatusOr<LayerRangeFactory> LayerRangeFactoryFor(
    absl::string_view name, const CudaOptions& cuda_options,
    std::string* note) {
  std::string ignored;
  if (note == nullptr) note = &ignored;
  if (name != "cpu" && name != "cuda" && name != "auto") {
    return absl::InvalidArgumentError(absl::StrCat(
        "unknown backend \"", name, "\"; choose one of ", kBackendChoices));
  }
  absl::Status cuda = absl::OkStatus();
  if (name != "cpu") cuda = CudaBackendStatus();
  if (name == "cpu" || (name == "auto" && !cuda.ok())) {
    *note = name == "cpu" ? "layers on the CPU"
                          : absl::StrCat(cuda.message(),
                                         "; layers on the CPU");
    return LayerRangeFactory(CreateCpuLayerRange);
  }
  if (!cuda.ok()) {
    return absl::Status(cuda.code(), absl::StrCat("cannot use the cuda "
                                                  "backend: ",
                                                  cuda.message()));
  }
  ASGD_ASSIGN_OR_RETURN(const CudaPluginApi* plugin, LoadCudaPlugin());
  absl::StatusOr<std::string> device = plugin->device_name(cuda_options.device);
  *note = absl::StrCat("layers on CUDA device ", cuda_options.device, " (",
                       device.ok() ? *device : "unknown name", ", ",
                       CudaMathModeName(cuda_options.math), " GEMMs)");
  return LayerRangeFactory(
      [plugin, cuda_options](const ModelSpec& spec, int first, int last,
                             int max_rows) {
        return plugin->create_range(spec, first, last, max_rows,
                                    cuda_options);
      });
}

absl::StatusOr<std::unique_ptr<ModelBackend>> CreateBackend(
    absl::string_view name, const ModelSpec& spec, int max_rows,
    std::string* note, const CudaOptions& cuda_options) {
  std::string local_note;
  auto dnn = Create(name, spec, max_rows, cuda_options, &local_note);
  if (note != nullptr) *note = dnn.ok() ? std::move(local_note) : "";
  return dnn;
}

}  // namespace asgd
