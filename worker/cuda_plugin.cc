// libasgd_cuda.so: the CUDA backend behind the plugin table of cuda_plugin.h.
#include "worker/cuda_plugin.h"

#include "worker/cuda_dnn.h"

namespace {

absl::StatusOr<std::unique_ptr<asgd::DnnBackend>> Create(
    const asgd::DnnSpec& spec, int max_batch,
    const asgd::CudaDnnOptions& options) {
  return asgd::CreateCudaDnn(spec, max_batch, options);
}

const asgd::CudaPluginApi kApi = {asgd::kCudaPluginAbiVersion, &Create,
                                  &asgd::CudaDeviceName,
                                  &asgd::CudaDeviceStatus};

}  // namespace

extern "C" const asgd::CudaPluginApi* asgd_cuda_plugin_api() { return &kApi; }
