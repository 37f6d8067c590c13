// OpTimer: the device time of each step a CudaExec enqueues (a GEMM, an
// element-wise pass, a reduction), summed by label, for profiling a layer's
// passes (cuda_profile.h) without a profiler. A CudaExec whose Context has a
// timer records one of the timer's events on its stream before each step and
// one after it; Collect() waits for them and adds up the intervals.
//
// The events cost a few microseconds per step, so the sums are a profile
// of where the time goes, not the time of an untimed pass.
//
// Internal to the plugin; compiled only by nvcc (CUDA headers).
//
// Thread-safety: one thread at a time.
#ifndef ASGD_MODEL_CUDA_OP_TIMER_H_
#define ASGD_MODEL_CUDA_OP_TIMER_H_

#include <cuda_runtime.h>

#include <cstddef>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "model/cuda/cuda_util.h"

namespace asgd {
namespace cuda {

class OpTimer {
 public:
  struct OpTime {
    std::string label;
    int calls = 0;
    double ms = 0.0;  // summed over the calls
  };

  // Records a start event on `stream` (events are made as needed and
  // reused after Collect()).
  absl::Status Begin(cudaStream_t stream);
  // Records the matching end event on `stream` and files the interval
  // since the last Begin() under `label`.
  absl::Status End(cudaStream_t stream, std::string label);
  // Waits for every recorded event; the intervals summed by label, in the
  // order each label was first seen. Starts afresh afterwards.
  absl::StatusOr<std::vector<OpTime>> Collect();

 private:
  absl::StatusOr<cudaEvent_t> Next();

  std::vector<Event> events_;        // timing events, reused
  size_t used_ = 0;                  // events_[0, used_) recorded since Collect
  std::vector<std::string> labels_;  // interval i: events 2i, 2i + 1
};

}  // namespace cuda
}  // namespace asgd

#endif  // ASGD_MODEL_CUDA_OP_TIMER_H_
