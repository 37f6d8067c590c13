#include "model/cuda/cuda_mirrors.h"

#include <cuda_runtime.h>

#include <utility>

#include "common/status_macros.h"
#include "model/backend.h"
#include "model/cuda/cuda_replay.h"

namespace asgd {
namespace cuda {

absl::StatusOr<std::unique_ptr<ExactCopy>> CreateDeviceCopy(int device,
                                                            int64_t count) {
  ASGD_CUDA_RETURN_IF_ERROR(cudaSetDevice(device));
  ASGD_ASSIGN_OR_RETURN(std::unique_ptr<DeviceExactCopy> copy,
                        DeviceExactCopy::Create(count));
  return std::unique_ptr<ExactCopy>(std::move(copy));
}

absl::Status ModelMirrors::Mirror(absl::Span<float> buffer, int64_t begin,
                                  const ExactCopy& copy) {
  ASGD_RETURN_IF_ERROR(CheckMirrorCall("MirrorFromCopy", buffer.size(), begin,
                                       copy.size(), num_params_));
  const auto* device_copy = dynamic_cast<const DeviceExactCopy*>(&copy);
  if (device_copy == nullptr) {
    return absl::InvalidArgumentError(
        "MirrorFromCopy: the CUDA backend mirrors only its own device copies");
  }
  ASGD_CUDA_RETURN_IF_ERROR(cudaSetDevice(device_));
  float* mirror = nullptr;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = of_.find(buffer.data());
    if (it == of_.end()) {
      ASGD_ASSIGN_OR_RETURN(DeviceBuffer<float> made,
                            DeviceBuffer<float>::Create(num_params_));
      it = of_.emplace(buffer.data(), std::move(made)).first;
    }
    mirror = it->second.get();  // the buffer stays until the backend goes
  }
  return device_copy->CopyToDevice(mirror + begin);
}

absl::Status ModelMirrors::Download(absl::Span<float> buffer, int64_t begin,
                                    int64_t count) {
  ASGD_RETURN_IF_ERROR(CheckMirrorCall("DownloadMirror", buffer.size(), begin,
                                       count, num_params_));
  const float* mirror = nullptr;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = of_.find(buffer.data());
    if (it == of_.end()) {
      return absl::FailedPreconditionError(
          "DownloadMirror of a buffer that has no mirror");
    }
    mirror = it->second.get();
  }
  if (count == 0) return absl::OkStatus();
  ASGD_CUDA_RETURN_IF_ERROR(cudaSetDevice(device_));
  // Synchronous: the mirror's range was written by a copy that its
  // MirrorFromCopy waited for; every other stream of the plugin is
  // non-blocking, so this waits for nothing else.
  ASGD_CUDA_RETURN_IF_ERROR(cudaMemcpy(buffer.data() + begin, mirror + begin,
                                       static_cast<size_t>(count) * sizeof(float),
                                       cudaMemcpyDeviceToHost));
  return absl::OkStatus();
}

absl::StatusOr<const float*> ModelMirrors::Find(
    absl::Span<const float> buffer) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = of_.find(buffer.data());
  if (it == of_.end()) {
    return absl::FailedPreconditionError(
        "LoadMirroredModel of a buffer that has no mirror");
  }
  return static_cast<const float*>(it->second.get());
}

}  // namespace cuda
}  // namespace asgd
