// BatchPool: the shared minibatch pool (SPEECH3/DistBelief style): workers
// take their next minibatch ids from one counter, so a slow worker simply
// takes fewer batches and a fast one more, with every batch of every epoch
// handed out exactly once.
//
// Batch id b is batch (b mod batches_per_epoch) of epoch b / batches_per_epoch;
// the frames of a batch are derived by the worker (see worker/frames.h
// EpochOrder). The first Take() fixes the dataset shape; later calls with a
// different shape fail with FailedPrecondition.
//
// Thread-safety: thread-safe.
#ifndef ASGD_SERVER_BATCH_POOL_H_
#define ASGD_SERVER_BATCH_POOL_H_

#include <cstdint>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

namespace asgd {

struct BatchGrant {
  std::vector<uint64_t> batch_ids;
  uint64_t batches_per_epoch = 0;
  bool exhausted = false;  // nothing left after this grant
};

class BatchPool {
 public:
  // Up to `count` (1..1024) next batch ids for a dataset of `num_frames`
  // frames, `batch_size` frames per batch, `epochs` passes (> 0).
  absl::StatusOr<BatchGrant> Take(uint64_t worker_id, uint64_t num_frames,
                                  uint32_t batch_size, double epochs,
                                  uint32_t count);

  // Batches handed to `worker_id` so far.
  uint64_t TakenBy(uint64_t worker_id) const;

 private:
  mutable absl::Mutex mu_;
  bool configured_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t num_frames_ ABSL_GUARDED_BY(mu_) = 0;
  uint32_t batch_size_ ABSL_GUARDED_BY(mu_) = 0;
  double epochs_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t total_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t next_ ABSL_GUARDED_BY(mu_) = 0;
  absl::flat_hash_map<uint64_t, uint64_t> taken_ ABSL_GUARDED_BY(mu_);
};

}  // namespace asgd

#endif  // ASGD_SERVER_BATCH_POOL_H_
