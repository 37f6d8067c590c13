// CreateHostReplayCopy: an ExactCopy (model/exact_copy.h) in host memory that
// replays each update with the device replay's own pass (replay_impl.h, from
// the ReplayPlan), run on the CPU in element order. It is what a device copy
// does, on a machine without a GPU: tests use it to check, bit for bit
// against the servers, everything that feeds device-resident copies (the
// delta receiver's plans, the pull reader, the client). It replays on one
// thread; a CPU worker's own host replay (DeltaReceiver with
// --replay_threads) is faster, so no backend makes these.
//
// Built without contracting multiply-adds (-ffp-contract=off), like step/.
//
// Thread-safety: one thread at a time per copy.
#ifndef ASGD_MODEL_CUDA_HOST_REPLAY_COPY_H_
#define ASGD_MODEL_CUDA_HOST_REPLAY_COPY_H_

#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
#include "model/exact_copy.h"

namespace asgd {

// A copy of `count` zeros. InvalidArgument for a negative count.
absl::StatusOr<std::unique_ptr<ExactCopy>> CreateHostReplayCopy(int64_t count);

}  // namespace asgd

#endif  // ASGD_MODEL_CUDA_HOST_REPLAY_COPY_H_
