// BatchPool: the shared minibatch pool (SPEECH3/DistBelief style): workers
// take their next minibatch ids from one counter, so a slow worker simply
// takes fewer batches and a fast one more, with every batch of every epoch
// handed out exactly once.
//
// Batch id b is batch (b mod batches_per_epoch) of epoch b / batches_per_epoch;
// the frames of a batch are derived by the worker (see worker/frames.h
// EpochOrder).
//
// Each dataset (num_frames, batch_size, epochs) has its own counter, so a
// client that names another dataset (by mistake, or to disturb training)
// neither redefines nor uses up the pool the workers share. At most
// max_datasets are kept; to make room for a new one, the least recently used
// dataset idle for at least idle_expiry is forgotten, and when none is, the
// request gets ResourceExhausted. Every argument is checked before any
// arithmetic: num_frames in [1, 2^40], batch_size in [1, num_frames] and at
// most 2^24, epochs finite in (0, 10^6] with at most 2^48 batches in all,
// count in [1, 1024]; anything else is InvalidArgument.
//
// Thread-safety: thread-safe.
#ifndef ASGD_SERVER_BATCH_POOL_H_
#define ASGD_SERVER_BATCH_POOL_H_

#include <cstdint>
#include <functional>
#include <map>
#include <tuple>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace asgd {

struct BatchGrant {
  std::vector<uint64_t> batch_ids;
  uint64_t batches_per_epoch = 0;
  bool exhausted = false;  // nothing left after this grant
};

struct BatchPoolOptions {
  int max_datasets = 8;
  absl::Duration idle_expiry = absl::Minutes(1);
  std::function<absl::Time()> clock;  // null: absl::Now
};

class BatchPool {
 public:
  explicit BatchPool(BatchPoolOptions options = {});

  // Up to `count` next batch ids of the dataset of `num_frames` frames,
  // `batch_size` frames per batch, `epochs` passes (see above for the
  // limits).
  absl::StatusOr<BatchGrant> Take(uint64_t worker_id, uint64_t num_frames,
                                  uint32_t batch_size, double epochs,
                                  uint32_t count);

  // Batches handed to `worker_id` so far, over every dataset kept (the
  // first 1024 workers of each).
  uint64_t TakenBy(uint64_t worker_id) const;
  // Datasets kept now.
  int datasets() const;

 private:
  using Key = std::tuple<uint64_t, uint32_t, double>;
  struct Dataset {
    uint64_t total = 0;
    uint64_t next = 0;
    absl::Time last_use;
    absl::flat_hash_map<uint64_t, uint64_t> taken;
  };

  const BatchPoolOptions options_;
  mutable absl::Mutex mu_;
  std::map<Key, Dataset> datasets_ ABSL_GUARDED_BY(mu_);
};

}  // namespace asgd

#endif  // ASGD_SERVER_BATCH_POOL_H_
