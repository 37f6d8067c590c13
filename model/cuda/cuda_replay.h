// DeviceExactCopy: a worker's exact copy of a server's slice in device
// memory, on which delta-pull updates (step/replay_plan.h) are replayed: the
// plan's tables and bit fields are uploaded (about 1/32 of the slice's
// float32 bytes for a one-bit update) and replay_impl.h's pass runs on the
// device, each operation rounded
// on its own (__fmul_rn, __fsub_rn, __fadd_rn), in Optimizer::Apply's order.
// The copy then equals the host replay's (worker/ps/delta_receiver.h) bit for
// bit; cuda_replay_test checks it on a GPU against ApplyCompressedRange, and
// replay_impl_test checks the same pass on the CPU on every machine.
//
// The CUDA backend's CreateExactCopy makes these (model/exact_copy.h): the
// worker's parameter client then keeps its copy of each server's slice on
// the device (--replay_on_device).
//
// Thread-safety: one thread at a time per copy, any thread (the client's
// pull threads): a copy remembers its device and makes it current in each
// call.
#ifndef ASGD_MODEL_CUDA_CUDA_REPLAY_H_
#define ASGD_MODEL_CUDA_CUDA_REPLAY_H_

#include <cstdint>
#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "model/exact_copy.h"
#include "step/replay_plan.h"

namespace asgd {

class DeviceExactCopy : public ExactCopy {
 public:
  // A copy of `count` elements (zeros) on the current device, with a stream
  // of its own. InvalidArgument for a negative count; ResourceExhausted when
  // the device memory runs out.
  static absl::StatusOr<std::unique_ptr<DeviceExactCopy>> Create(int64_t count);

  // The copy in device memory (size() floats), for the kernels that use it.
  virtual float* device_data() = 0;

  // The copy into device memory `dst` (size() floats, on the copy's
  // device), through the copy's stream; returns when it is there.
  virtual absl::Status CopyToDevice(float* dst) const = 0;

  // ExactCopy (model/exact_copy.h) on the device: Upload and Download
  // copy through the copy's stream; Replay uploads the plan's tables and
  // returns when the copy is updated; a CUDA error is returned as
  // cuda_util.h's CudaError says.
};

}  // namespace asgd

#endif  // ASGD_MODEL_CUDA_CUDA_REPLAY_H_
