#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "model/cuda/op_timer.h"

namespace asgd {
namespace cuda {

absl::StatusOr<cudaEvent_t> OpTimer::Next() {
  if (used_ == events_.size()) {
    cudaEvent_t e = nullptr;
    // Timing events (CreateEvent's disable timing).
    ASGD_CUDA_RETURN_IF_ERROR(cudaEventCreate(&e));
    events_.emplace_back(e);
  }
  return events_[used_++].get();
}

absl::Status OpTimer::Begin(cudaStream_t stream) {
  if (used_ % 2 != 0) {
    return absl::FailedPreconditionError("OpTimer::Begin twice without End");
  }
  ASGD_ASSIGN_OR_RETURN(cudaEvent_t e, Next());
  ASGD_CUDA_RETURN_IF_ERROR(cudaEventRecord(e, stream));
  return absl::OkStatus();
}

absl::Status OpTimer::End(cudaStream_t stream, std::string label) {
  if (used_ % 2 != 1) {
    return absl::FailedPreconditionError("OpTimer::End without Begin");
  }
  ASGD_ASSIGN_OR_RETURN(cudaEvent_t e, Next());
  ASGD_CUDA_RETURN_IF_ERROR(cudaEventRecord(e, stream));
  labels_.push_back(std::move(label));
  return absl::OkStatus();
}

absl::StatusOr<std::vector<OpTimer::OpTime>> OpTimer::Collect() {
  if (used_ % 2 != 0) {
    return absl::FailedPreconditionError("OpTimer::Collect inside a step");
  }
  std::vector<OpTime> times;
  for (size_t i = 0; i < labels_.size(); ++i) {
    cudaEvent_t end = events_[2 * i + 1].get();
    ASGD_CUDA_RETURN_IF_ERROR(cudaEventSynchronize(end));
    float ms = 0.0f;
    ASGD_CUDA_RETURN_IF_ERROR(
        cudaEventElapsedTime(&ms, events_[2 * i].get(), end));
    size_t j = 0;
    while (j < times.size() && times[j].label != labels_[i]) ++j;
    if (j == times.size()) times.push_back({labels_[i], 0, 0.0});
    ++times[j].calls;
    times[j].ms += ms;
  }
  used_ = 0;
  labels_.clear();
  return times;
}

}  // namespace cuda
}  // namespace asgd
