// LookAheadSource: draws another source's minibatches one ahead of the
// training loop and announces each one (the `announce` callback, given the
// batch's view) while the loop still holds the one before it, so that a
// backend that stages minibatches (ModelBackend::StageNext,
// model/backend.h) copies the next one to its device while the current one
// computes.
//
//   auto source = std::make_unique<LookAheadSource>(
//       std::move(inner), [backend](const Batch& next) {
//         backend->StageNext(next);
//       }, BatchBuffer(b, s, dim));
//   while (*source->Next(&batch)) backend->AccumulateGradient(batch.view());
//
// The loop sees exactly the other source's minibatches, in order, with its
// epochs as of each one; its end and its errors come where they would
// without this source (after the minibatch before them), and stay.
// The announced batch's memory is not touched until the Next call after the
// one that returns it (which swaps it into the caller's buffer unchanged):
// a backend's staged copy of it stays valid through the gradient call that
// reads it. As with PrefetchSource, one minibatch more than the loop uses is
// drawn, so do not wrap the servers' shared minibatch pool.
//
// Thread-safety: one thread (Next, epochs), like the other source; the
// callback runs on that thread, inside Next.
#ifndef ASGD_WORKER_DATA_LOOK_AHEAD_SOURCE_H_
#define ASGD_WORKER_DATA_LOOK_AHEAD_SOURCE_H_

#include <functional>
#include <memory>

#include "absl/status/statusor.h"
#include "model/backend.h"
#include "worker/data/batch_source.h"
#include "worker/data/examples.h"

namespace asgd {

class LookAheadSource final : public BatchSource {
 public:
  using Announce = std::function<void(const Batch& next)>;

  // `prototype` has the shape of the batches Next is called with.
  LookAheadSource(std::unique_ptr<BatchSource> inner, Announce announce,
                  const BatchBuffer& prototype);

  // The other source's next minibatch, swapped into *batch (whose memory
  // becomes the one drawn ahead); false at the end, its error.
  absl::StatusOr<bool> Next(BatchBuffer* batch) override;
  // The other source's epochs as of the last minibatch Next returned.
  double epochs() const override { return epochs_; }

 private:
  const std::unique_ptr<BatchSource> inner_;
  const Announce announce_;
  BatchBuffer ahead_;
  absl::StatusOr<bool> ahead_more_ = false;
  double ahead_epochs_ = 0;
  bool started_ = false;
  double epochs_ = 0;
};

// `source` wrapped so that `backend` gets each minibatch a step ahead, when
// it stages minibatches (ModelBackend::stages_batches); otherwise `source`
// itself. `backend` must outlive the source returned.
std::unique_ptr<BatchSource> StageAhead(std::unique_ptr<BatchSource> source,
                                        ModelBackend* backend,
                                        const BatchBuffer& prototype);

}  // namespace asgd

#endif  // ASGD_WORKER_DATA_LOOK_AHEAD_SOURCE_H_
