// ExactCopy: a worker's exact copy of one server's slice, kept where the
// model lives (a device's memory), on which the updates of delta pulls
// (worker/ps/delta_receiver.h) are replayed there. The worker's parameter
// client holds one per server when asked to (ParamClient::KeepExactCopiesOn),
// made by the backend (ModelBackend::CreateExactCopy); without one, the copy
// is a host vector replayed by step/compressed_apply.h.
//
// Contract of every implementation: Replay(plan, lr, wd) leaves the copy
// bit for bit what ApplyCompressedRange (the server's apply, plain SGD with
// weight decay `wd` at rate `lr`) leaves on the same weights and the same
// chunks under the same pruning mask, because it runs Optimizer::Apply's
// operations in its order, each rounded on its own (model/cuda/replay_impl.h
// states the arithmetic).
// //model/cuda:replay_impl_test checks that pass on the CPU; the CUDA
// plugin's copies are checked by //model/cuda:cuda_replay_test on a GPU.
//
// Thread-safety: one thread at a time per copy; copies are independent of
// each other and of the backend that made them (their own memory and
// stream), so the client's pull threads use them while the backend trains.
#ifndef ASGD_MODEL_EXACT_COPY_H_
#define ASGD_MODEL_EXACT_COPY_H_

#include <cstdint>
#include <functional>
#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "step/replay_plan.h"

namespace asgd {

class ExactCopy {
 public:
  virtual ~ExactCopy() = default;

  // Floats in the copy (the server's slice).
  virtual int64_t size() const = 0;

  // Weights from a pull: `host` (size() floats) becomes the copy, and
  // `keep` its pruning mask: empty for a dense model, else size() flags, 0
  // where the element is pruned. Every Replay until the next Upload runs
  // under the mask as the server's apply does (UpdateContext::keep,
  // step/optimizer.h): a pruned element's gradient is +0. InvalidArgument
  // for another size, with the copy unchanged.
  virtual absl::Status Upload(absl::Span<const float> host,
                              absl::Span<const uint8_t> keep) = 0;
  // The weights of a dense model.
  absl::Status Upload(absl::Span<const float> host) { return Upload(host, {}); }

  // The copy into `host` (size() floats). InvalidArgument for another size.
  virtual absl::Status Download(absl::Span<float> host) const = 0;

  // Replays one update (plan.count == size()) with learning rate `lr` and
  // weight decay `wd`, under the mask of the last Upload: both finite, lr > 0,
  // wd >= 0, else InvalidArgument with nothing written. Returns when the copy
  // is updated. DataLoss when an element it wrote is NaN or beyond
  // kMaxMagnitude (step/optimizer.h): the copy is then lost (pull weights
  // again), as a host copy is.
  virtual absl::Status Replay(const ReplayPlan& plan, float lr, float wd) = 0;

  // Bytes of the last Replay's plan tables (ReplayPlan::bytes()): what a
  // device copy uploads per update.
  virtual int64_t last_upload_bytes() const = 0;
};

// Makes an exact copy of `count` floats (zeros), e.g. a backend's
// CreateExactCopy. ResourceExhausted when the memory is not there.
using ExactCopyFactory =
    std::function<absl::StatusOr<std::unique_ptr<ExactCopy>>(int64_t count)>;

}  // namespace asgd

#endif  // ASGD_MODEL_EXACT_COPY_H_
