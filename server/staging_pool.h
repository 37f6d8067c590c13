// StagingPool: reusable float buffers of one size, for staging incoming
// pushes, with a cap on how many exist at once. Allocating, page-faulting and
// zero-filling a fresh model-sized buffer for every push cost as much CPU as
// the copies themselves; the cap bounds the memory that pushes in flight can
// take (a server's --push_memory_mb), whatever clients do.
//
//   StagingPool pool(store_range_size, /*max_idle=*/4, /*max_buffers=*/11);
//   std::shared_ptr<std::vector<float>> buf = pool.Acquire();  // any contents
//   if (buf == nullptr) { ... all 11 in use: refuse the push ... }
//   ...                              // the last reference hands it back
//
// Every buffer counts against max_buffers from its allocation until it is
// freed, idle ones included. The pool keeps at most `max_idle` idle buffers
// and frees any beyond that.
//
// Thread-safety: thread-safe. Buffers may outlive the pool; they are then
// freed instead of returned.
#ifndef ASGD_SERVER_STAGING_POOL_H_
#define ASGD_SERVER_STAGING_POOL_H_

#include <cstdint>
#include <limits>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace asgd {

class StagingPool {
 public:
  StagingPool(int64_t elements, int max_idle,
              int64_t max_buffers = std::numeric_limits<int64_t>::max());

  // A buffer of `elements` floats with unspecified contents, or null when
  // max_buffers are in use.
  std::shared_ptr<std::vector<float>> Acquire();

  // Buffers waiting for reuse.
  int idle() const;
  // Buffers allocated so far (not reused).
  int64_t allocations() const;
  // Buffers that exist now (in use or idle).
  int64_t live() const;
  int64_t max_buffers() const { return state_->max_buffers; }

 private:
  struct State {
    State(int max, int64_t cap) : max_idle(max), max_buffers(cap) {}
    const int max_idle;
    const int64_t max_buffers;
    mutable absl::Mutex mu;
    std::vector<std::unique_ptr<std::vector<float>>> idle ABSL_GUARDED_BY(mu);
    int64_t allocations ABSL_GUARDED_BY(mu) = 0;
    int64_t live ABSL_GUARDED_BY(mu) = 0;
  };

  const int64_t elements_;
  std::shared_ptr<State> state_;
};

}  // namespace asgd

#endif  // ASGD_SERVER_STAGING_POOL_H_
