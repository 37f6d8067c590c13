// PrefetchSource: draws another source's minibatches on a thread of its
// own, up to `depth` ahead of the training loop, so that preparing the next
// minibatch (gathering frames and their context, reading features from
// disk) overlaps the computation of the current one. The minibatches, their
// order and every error are the other source's: a loop sees exactly what it
// would see without it, one step later in wall time at most.
//
//   auto source = std::make_unique<PrefetchSource>(std::move(inner), 2,
//                                                  BatchBuffer(b, s, dim));
//   while (*source->Next(&batch)) { ... }
//
// Memory: depth + 1 minibatch buffers of the prototype's shape. The other
// source runs ahead by up to `depth` minibatches, so a loop that stops
// early (a step limit, a time budget) leaves up to `depth` drawn and unused;
// do not wrap a source whose minibatches are shared with other workers (the
// servers' minibatch pool).
//
// Thread-safety: a source is used by one thread (Next, epochs); the other
// source is used only by the prefetching thread from construction on. The
// destructor stops that thread, waiting for a Next in flight.
#ifndef ASGD_WORKER_DATA_PREFETCH_SOURCE_H_
#define ASGD_WORKER_DATA_PREFETCH_SOURCE_H_

#include <deque>
#include <memory>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "worker/data/batch_source.h"
#include "worker/data/examples.h"

namespace asgd {

class PrefetchSource final : public BatchSource {
 public:
  // `depth` in [1, 16] (clamped); `prototype` has the shape of the batches
  // Next is called with.
  PrefetchSource(std::unique_ptr<BatchSource> inner, int depth,
                 const BatchBuffer& prototype);
  ~PrefetchSource() override;

  PrefetchSource(const PrefetchSource&) = delete;
  PrefetchSource& operator=(const PrefetchSource&) = delete;

  // The other source's next minibatch, swapped into *batch (whose memory
  // becomes a prefetch buffer); its false at the end, its error.
  absl::StatusOr<bool> Next(BatchBuffer* batch) override;
  // The other source's epochs as of the last minibatch Next returned.
  double epochs() const override { return epochs_; }

 private:
  struct Drawn {
    absl::StatusOr<bool> more = false;
    BatchBuffer batch;
    double epochs = 0;
  };
  void Run();

  const std::unique_ptr<BatchSource> inner_;
  const int depth_;
  double epochs_ = 0;  // the caller's thread only
  absl::Mutex mu_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::deque<Drawn> ready_ ABSL_GUARDED_BY(mu_);
  std::vector<BatchBuffer> free_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;
};

}  // namespace asgd

#endif  // ASGD_WORKER_DATA_PREFETCH_SOURCE_H_
