// StagingPool: reusable float buffers of one size, for staging incoming
// pushes, and the byte budget that staged data is charged against.
// Allocating, page-faulting and zero-filling a fresh model-sized buffer for
// every push cost as much CPU as the copies themselves, so released buffers
// are kept for reuse; the budget bounds the memory that pushes in flight can
// take (a server's --push_memory_mb), whatever clients do.
//
//   StagingPool pool(store_range_size, /*max_idle=*/4, /*max_bytes=*/1 << 30);
//   std::shared_ptr<std::vector<float>> buf = pool.Acquire();  // any contents
//   if (!pool.Charge(buf.get(), chunk_bytes)) { ... refuse the push ... }
//   ...                              // the last reference hands it back
//
// The budget is charged as data arrives, not when a push starts: a push is
// charged for the bytes it has staged so far (Charge() before each chunk is
// written), and its charge is given back with the buffer. So what a client
// holds is bounded by what it has actually sent, and a stream that sends a
// few bytes and stalls takes a few bytes of the budget, not a model-sized
// share of it. A fresh buffer's pages are handed back to the kernel before
// it is used (it becomes resident only as it is written), so a stalled push
// that was charged little also holds little memory. Resident staging memory
// is therefore at most the budget plus the idle buffers kept for reuse
// (`max_idle` buffers, which may have been handed to pushes that have not
// filled them yet).
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
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"

namespace asgd {

class StagingPool {
 public:
  StagingPool(int64_t elements, int max_idle,
              int64_t max_bytes = std::numeric_limits<int64_t>::max());

  // A buffer of `elements` floats with unspecified contents, charged
  // nothing yet.
  std::shared_ptr<std::vector<float>> Acquire();

  // Charges `bytes` (>= 0) more to `buffer`, one that Acquire() returned and
  // that is still held, against the budget. False, and nothing charged, when
  // the bytes charged to all buffers would exceed max_bytes.
  bool Charge(const std::vector<float>* buffer, int64_t bytes);

  // Acquire() charged with `bytes` at once; null (and no buffer taken) when
  // they do not fit.
  std::shared_ptr<std::vector<float>> AcquireCharged(int64_t bytes);

  // Buffers waiting for reuse.
  int idle() const;
  // Buffers allocated so far (not reused).
  int64_t allocations() const;
  // Buffers that exist now (in use or idle).
  int64_t live() const;
  // Bytes charged to the buffers in use, and the budget.
  int64_t charged_bytes() const;
  int64_t max_bytes() const { return state_->max_bytes; }

 private:
  struct State {
    State(int max, int64_t cap) : max_idle(max), max_bytes(cap) {}
    const int max_idle;
    const int64_t max_bytes;
    mutable absl::Mutex mu;
    std::vector<std::unique_ptr<std::vector<float>>> idle ABSL_GUARDED_BY(mu);
    // The bytes charged to each buffer in use (absent: none).
    absl::flat_hash_map<const std::vector<float>*, int64_t> charges
        ABSL_GUARDED_BY(mu);
    int64_t charged ABSL_GUARDED_BY(mu) = 0;
    int64_t allocations ABSL_GUARDED_BY(mu) = 0;
    int64_t live ABSL_GUARDED_BY(mu) = 0;
  };

  const int64_t elements_;
  std::shared_ptr<State> state_;
};

}  // namespace asgd

#endif  // ASGD_SERVER_STAGING_POOL_H_
