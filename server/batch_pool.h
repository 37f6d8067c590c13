// BatchPool: the shared minibatch pool (SPEECH3/DistBelief style): workers
// take their next minibatch ids from one counter, so a slow worker simply
// takes fewer batches and a fast one more, with every batch of every epoch
// handed out exactly once.
//
// Batch id b is batch (b mod batches_per_epoch) of epoch b / batches_per_epoch;
// the frames of a batch are derived by the worker (see worker/frames.h
// EpochOrder).
//
// Each dataset (run_id, num_frames, batch_size, epochs) has its own counter.
// The run id is a secret the workers of one run share (common/pool_run_id.h),
// so a client that does not know it cannot take or use up their batches: a
// dataset it names is one of its own, even with the workers' frames, batch
// size and epochs. A request without an acceptable run id is refused.
//
// Bounds, so that no client can fill the pool and keep a run out:
//  * each client address (PeerAddress of the call) creates at most
//    max_datasets_per_client datasets; past that, to make room for its new
//    one, its least recently used dataset idle for at least idle_expiry is
//    forgotten, and when none is, the request gets ResourceExhausted. Joining
//    a dataset that exists (another worker of the run) is never limited.
//  * at most max_datasets datasets in all, with the same rule: the least
//    recently used dataset idle for idle_expiry makes room, else
//    ResourceExhausted.
// A client at one address therefore holds at most max_datasets_per_client of
// the max_datasets slots; it takes max_datasets / max_datasets_per_client
// addresses to fill them, and even then only until idle_expiry after they
// stop. Workers retry a ResourceExhausted pool (worker/ps/trainer.h).
//
// Every argument is checked before any arithmetic: run_id 16 to 256 bytes,
// num_frames in [1, 2^40], batch_size in [1, num_frames] and at most 2^24,
// epochs finite in (0, 10^6] with at most 2^48 batches in all, count in
// [1, 1024]; anything else is InvalidArgument. Messages never contain the
// run id.
//
// Thread-safety: thread-safe.
#ifndef ASGD_SERVER_BATCH_POOL_H_
#define ASGD_SERVER_BATCH_POOL_H_

#include <cstdint>
#include <functional>
#include <map>
#include <string>
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
  int max_datasets = 64;
  int max_datasets_per_client = 4;
  absl::Duration idle_expiry = absl::Minutes(1);
  std::function<absl::Time()> clock;  // null: absl::Now
};

// One FetchBatches request (proto FetchBatchesRequest).
struct BatchRequest {
  // The caller's address without its port (PeerAddress()), for the
  // per-client bound. Every worker of a run may have its own.
  std::string client;
  std::string run_id;
  uint64_t worker_id = 0;
  uint64_t num_frames = 0;
  uint32_t batch_size = 0;
  double epochs = 0;
  uint32_t count = 0;
};

class BatchPool {
 public:
  explicit BatchPool(BatchPoolOptions options = {});

  // Up to `request.count` next batch ids of the dataset of the request's run
  // id, frames, batch size and epochs (see above for the limits).
  absl::StatusOr<BatchGrant> Take(const BatchRequest& request);

  // Batches handed to `worker_id` so far, over every dataset kept (the
  // first 1024 workers of each).
  uint64_t TakenBy(uint64_t worker_id) const;
  // Datasets kept now, in all and created by `client`.
  int datasets() const;
  int datasets_of(const std::string& client) const;

 private:
  using Key = std::tuple<std::string, uint64_t, uint32_t, double>;
  struct Dataset {
    std::string client;  // the address that created it
    uint64_t total = 0;
    uint64_t next = 0;
    absl::Time last_use;
    absl::flat_hash_map<uint64_t, uint64_t> taken;
  };

  // Forgets the least recently used dataset idle since `now - idle_expiry`
  // (of `client` only, unless null); false when there is none.
  bool ForgetIdlest(absl::Time now, const std::string* client)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const BatchPoolOptions options_;
  mutable absl::Mutex mu_;
  std::map<Key, Dataset> datasets_ ABSL_GUARDED_BY(mu_);
};

}  // namespace asgd

#endif  // ASGD_SERVER_BATCH_POOL_H_
