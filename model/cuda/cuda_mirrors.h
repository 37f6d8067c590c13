// ModelMirrors: the CUDA backend's mirrors of the worker's model buffers
// (ModelBackend::MirrorFromCopy, LoadMirroredModel): one device buffer of
// the model's size per host buffer, made on its first use, into which each
// server's slice is copied device to device from the parameter client's
// device copies (DeviceExactCopy, cuda_replay.h) when a pull completes. The
// resident model then loads a pulled model from its mirror, device to
// device, instead of uploading it from host memory.
//
// Internal to the plugin (nvcc only: includes cuda_util.h).
//
// Thread-safety: Mirror and Download may be called from any thread, for
// disjoint ranges of one buffer concurrently; Find from the backend's
// thread.
#ifndef ASGD_MODEL_CUDA_CUDA_MIRRORS_H_
#define ASGD_MODEL_CUDA_CUDA_MIRRORS_H_

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "model/cuda/cuda_util.h"
#include "model/exact_copy.h"

namespace asgd {
namespace cuda {

// A DeviceExactCopy of `count` floats on `device` (the backend's
// CreateExactCopy).
absl::StatusOr<std::unique_ptr<ExactCopy>> CreateDeviceCopy(int device,
                                                            int64_t count);

class ModelMirrors {
 public:
  ModelMirrors(int device, int64_t num_params)
      : device_(device), num_params_(num_params) {}

  // As ModelBackend::MirrorFromCopy: `copy` must be a DeviceExactCopy.
  absl::Status Mirror(absl::Span<float> buffer, int64_t begin,
                      const ExactCopy& copy);
  // As ModelBackend::DownloadMirror.
  absl::Status Download(absl::Span<float> buffer, int64_t begin, int64_t count);
  // The mirror of `buffer`; FailedPrecondition when it has none.
  absl::StatusOr<const float*> Find(absl::Span<const float> buffer);

 private:
  const int device_;
  const int64_t num_params_;
  std::mutex mu_;
  std::map<const float*, DeviceBuffer<float>> of_;  // guarded by mu_
};

}  // namespace cuda
}  // namespace asgd

#endif  // ASGD_MODEL_CUDA_CUDA_MIRRORS_H_
