// StagingPool: reusable float buffers of one size, for staging incoming
// pushes. Allocating, page-faulting and zero-filling a fresh model-sized
// buffer for every push cost as much CPU as the copies themselves.
//
//   StagingPool pool(store_range_size, /*max_idle=*/4);
//   std::shared_ptr<std::vector<float>> buf = pool.Acquire();  // any contents
//   ...                              // the last reference hands it back
//
// The pool keeps at most `max_idle` idle buffers and frees any beyond that.
//
// Thread-safety: thread-safe. Buffers may outlive the pool; they are then
// freed instead of returned.
#ifndef ASGD_SERVER_STAGING_POOL_H_
#define ASGD_SERVER_STAGING_POOL_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace asgd {

class StagingPool {
 public:
  StagingPool(int64_t elements, int max_idle);

  // A buffer of `elements` floats with unspecified contents.
  std::shared_ptr<std::vector<float>> Acquire();

  // Buffers waiting for reuse.
  int idle() const;
  // Buffers allocated so far (not reused).
  int64_t allocations() const;

 private:
  struct State {
    explicit State(int max) : max_idle(max) {}
    const int max_idle;
    mutable absl::Mutex mu;
    std::vector<std::unique_ptr<std::vector<float>>> idle ABSL_GUARDED_BY(mu);
    int64_t allocations ABSL_GUARDED_BY(mu) = 0;
  };

  const int64_t elements_;
  std::shared_ptr<State> state_;
};

}  // namespace asgd

#endif  // ASGD_SERVER_STAGING_POOL_H_
