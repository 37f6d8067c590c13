// libasgd_cuda.so: the CUDA backend behind the plugin table of cuda_plugin.h.
#include "model/cuda/cuda_plugin.h"

#include "model/cuda/cuda_backend.h"
#include "model/cuda/cuda_layer_range.h"
#include "model/cuda/cuda_profile.h"

namespace {

absl::StatusOr<std::unique_ptr<asgd::ModelBackend>> Create(
    const asgd::ModelSpec& spec, int max_batch,
    const asgd::CudaOptions& options) {
  return asgd::CreateCudaBackend(spec, max_batch, options);
}

const asgd::CudaPluginApi kApi = {
    asgd::kCudaPluginAbiVersion, &Create,
    &asgd::CreateCudaLayerRange, &asgd::CudaDeviceName,
    &asgd::CudaDeviceStatus,     &asgd::ProfileCudaLayers};

}  // namespace

extern "C" const asgd::CudaPluginApi* asgd_cuda_plugin_api() { return &kApi; }
