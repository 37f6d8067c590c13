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
// Internal to the plugin so far: the piece that the worker's device-resident
// exact copy (the backend holding the delta receiver's copy) is to be built
// on; nothing in the worker uses it yet.
//
// Thread-safety: one thread at a time.
#ifndef ASGD_MODEL_CUDA_CUDA_REPLAY_H_
#define ASGD_MODEL_CUDA_CUDA_REPLAY_H_

#include <cstdint>
#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "step/replay_plan.h"

namespace asgd {

class DeviceExactCopy {
 public:
  // A copy of `count` elements (zeros) on the current device, with a stream
  // of its own. InvalidArgument for a negative count; ResourceExhausted when
  // the device memory runs out.
  static absl::StatusOr<std::unique_ptr<DeviceExactCopy>> Create(int64_t count);
  virtual ~DeviceExactCopy() = default;

  virtual int64_t size() const = 0;
  // The copy in device memory (size() floats), for the kernels that use it.
  virtual float* device_data() = 0;

  // Weights from a pull: `host` (size() floats) becomes the copy.
  virtual absl::Status Upload(absl::Span<const float> host) = 0;
  // The copy into `host` (size() floats): for a save, an evaluation, a check.
  virtual absl::Status Download(absl::Span<float> host) const = 0;

  // Replays `plan` (plan.count == size()) with learning rate `lr` and weight
  // decay `wd`, as DeltaReceiver replays an update: both finite, lr > 0,
  // wd >= 0, else InvalidArgument with nothing written. Returns when the
  // copy is updated. DataLoss when an element it wrote is NaN or beyond
  // kMaxMagnitude: the copy is then lost (pull weights again), as on the
  // host. A CUDA error as cuda_util.h's CudaError says.
  virtual absl::Status Replay(const ReplayPlan& plan, float lr, float wd) = 0;

  // Bytes uploaded by the last Replay (the plan's tables).
  virtual int64_t last_upload_bytes() const = 0;
};

}  // namespace asgd

#endif  // ASGD_MODEL_CUDA_CUDA_REPLAY_H_
