// Shard: one contiguous range of a server's weights, owned by one apply thread.
//
// The shard's thread is the only writer of its range of the weights and of its
// optimizer state. Work arrives through a bounded FIFO queue of ApplyTasks;
// TryEnqueue never blocks. Readers (pulls) may copy the weights while the
// apply thread writes them: as in Hogwild/ASGD, a pull may see a mix of two
// consecutive versions of some elements, never torn floats on x86-64.
//
// Lifecycle: the constructor starts the thread; Close() (also run by the
// destructor) stops accepting work, applies everything already queued, and
// joins the thread.
//
// Thread-safety: TryEnqueue, applied() and Close() are thread-safe.
#ifndef ASGD_SERVER_SHARD_H_
#define ASGD_SERVER_SHARD_H_

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "server/optimizer.h"

namespace asgd {

// Shared by the ApplyTasks of one push: `on_done` runs once, on the apply
// thread of the last shard to finish its part.
struct PushCompletion {
  std::atomic<int> remaining{0};
  std::function<void()> on_done;
};

// Where a snapshot task copies a shard's weights and optimizer state: into
// its own sub-range of these server-local buffers (state may be empty).
struct SnapshotTarget {
  std::vector<float> weights;
  std::vector<float> state;
};

struct ApplyTask {
  enum class Kind {
    kGradient,  // an optimizer step with `data` as the gradient
    kAssign,    // set the weights to `data` and reset the optimizer state
    kSnapshot,  // copy weights and state into `snapshot` (not an update)
  };
  Kind kind = Kind::kGradient;
  // Server-local values (the whole server range); the shard reads its own
  // sub-range.
  std::shared_ptr<const std::vector<float>> data;
  float scale = 1.0f;  // learning-rate multiplier of this update
  // The model the gradient was computed from (server-local), for delay
  // compensation; may be null.
  std::shared_ptr<const std::vector<float>> backup;
  std::shared_ptr<SnapshotTarget> snapshot;  // kSnapshot only
  std::shared_ptr<PushCompletion> completion;
};

class Shard {
 public:
  // Called on the apply thread after each task with (shard index, seconds).
  using AppliedCallback = std::function<void(int, double)>;

  // `weights` points at element `local_begin` of the server's weight buffer,
  // holds `size` floats and must outlive the shard. `on_applied` may be empty.
  Shard(int index, float* weights, int64_t local_begin, int64_t size,
        const Optimizer* optimizer, int queue_capacity,
        AppliedCallback on_applied = nullptr);
  ~Shard();

  Shard(const Shard&) = delete;
  Shard& operator=(const Shard&) = delete;

  // False if the queue is full or the shard is closed. A `control` task (a
  // snapshot) is admitted beyond the capacity.
  bool TryEnqueue(ApplyTask task, bool control = false);

  // Sets the shard's weights and optimizer state from server-local buffers
  // (its own sub-range; `state` may be empty) and its step to `applied`.
  // Only before any task is enqueued (restoring a checkpoint at start).
  void Restore(const std::vector<float>& weights,
               const std::vector<float>& state, uint64_t applied);

  // Number of tasks applied so far (the shard's step; the learning-rate
  // schedule follows it).
  uint64_t applied() const { return applied_.load(std::memory_order_acquire); }

  int index() const { return index_; }
  int64_t local_begin() const { return local_begin_; }
  int64_t size() const { return size_; }

  void Close();

 private:
  void Run();

  const int index_;
  float* const weights_;
  const int64_t local_begin_;
  const int64_t size_;
  const Optimizer* const optimizer_;
  const size_t capacity_;
  const AppliedCallback on_applied_;
  std::vector<float> state_;  // optimizer state; apply thread only

  absl::Mutex mu_;
  std::deque<ApplyTask> queue_ ABSL_GUARDED_BY(mu_);
  bool closed_ ABSL_GUARDED_BY(mu_) = false;

  std::atomic<uint64_t> applied_{0};
  std::thread thread_;
};

}  // namespace asgd

#endif  // ASGD_SERVER_SHARD_H_
