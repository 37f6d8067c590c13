// BatchStager: the CUDA backend's minibatch inputs and labels on the device,
// in two slots with a copy stream of their own, so that the batch announced
// by ModelBackend::StageNext (model/backend.h) is copied into pinned memory
// and uploaded while the minibatch before it computes (batch_staging.h says
// which slot each call reads and fills; this class owns the memory and
// enqueues the copies).
//
// A call: Acquire(batch, compute) makes the batch's rows (and labels) ready
// in a slot: a staged batch is already there; any other is copied through
// the slot's pinned buffer and uploaded now, and `compute` waits for it.
// A gradient call then enqueues its work on `compute` and calls
// StageAnnounced(): the announced batch, if any, is copied into the other
// slot's pinned buffer (on the host, while the device computes) and its
// upload enqueued. Finish() waits for the stager's stream (every call ends
// with it, so no upload is in flight between calls and a slot's pinned
// buffer is free to refill); after an error, Drain().
//
// Internal to the plugin; the pointers it returns are device memory.
//
// Thread-safety: none; the backend's (one thread at a time).
#ifndef ASGD_MODEL_CUDA_CUDA_BATCH_STAGER_H_
#define ASGD_MODEL_CUDA_CUDA_BATCH_STAGER_H_

#include <array>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "model/backend.h"
#include "model/cuda/batch_staging.h"
#include "model/cuda/cuda_util.h"

namespace asgd {
namespace cuda {

class BatchStager {
 public:
  // Where a call's batch is on the device.
  struct Slot {
    const float* inputs = nullptr;    // [rows, input_dim]
    const int32_t* labels = nullptr;  // [rows * output_frames]
  };

  // Slots of `max_rows` rows of `input_dim` floats and `max_labels` labels.
  static absl::StatusOr<BatchStager> Create(int64_t max_rows, int64_t input_dim,
                                            int64_t max_labels);

  void Announce(const Batch& next) { staging_.Announce(next); }

  // The batch (checked by the caller: sizes within the slots) in a slot;
  // `compute` waits for whatever of it is still being uploaded. Labels are
  // uploaded only `with_labels` (a gradient call).
  absl::StatusOr<Slot> Acquire(const Batch& batch, bool with_labels,
                               cudaStream_t compute);

  // The announced batch into the slot the current call does not read, its
  // upload enqueued; nothing without an announcement. A batch larger than a
  // slot is not staged (its gradient call will refuse it).
  absl::Status StageAnnounced();

  // Waits for the stager's uploads.
  absl::Status Finish();

  // After an error: waits for the stream, forgets what was staged.
  void Drain();

 private:
  struct Buffers {
    PinnedHostBuffer<float> h_inputs;
    PinnedHostBuffer<int32_t> h_labels;
    DeviceBuffer<float> d_inputs;
    DeviceBuffer<int32_t> d_labels;
    Event uploaded;  // on stream_
  };

  // Copies `batch` into slot `slot`'s pinned buffers and enqueues its upload
  // (labels too with `with_labels`), then records the slot's event.
  absl::Status Upload(const Batch& batch, int slot, bool with_labels);

  Stream stream_;
  std::array<Buffers, 2> slots_;
  BatchStaging staging_;
};

}  // namespace cuda
}  // namespace asgd

#endif  // ASGD_MODEL_CUDA_CUDA_BATCH_STAGER_H_
