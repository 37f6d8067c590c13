// Shard: one contiguous range of a server's weights, owned by one apply thread.
//
// The shard's thread is the only writer of its range of the weights and of its
// optimizer state. Work arrives through a bounded FIFO queue of ApplyTasks;
// TryEnqueue never blocks. Readers (pulls) may copy the weights while the
// apply thread writes them: as in Hogwild/ASGD, a pull may see a mix of two
// consecutive versions of some elements, never torn floats on x86-64.
//
// After each update the shard publishes the largest |w| and |v| of its range
// (max_abs_w(), max_abs_v(); taken inside the apply loop), so that the store
// can bound what the next updates can do. An update whose bound failed comes
// with an UpdateCheck: every shard then checks its part read-only, and all
// of them apply it only if every part stays finite (all or none); otherwise
// none writes anything, and the update still counts as a step.
//
// Lifecycle: the constructor starts the thread; Close() (also run by the
// destructor) stops accepting work, applies everything already queued, and
// joins the thread.
//
// Thread-safety: TryEnqueue, applied(), max_abs_w(), max_abs_v() and Close()
// are thread-safe.
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
#include "step/compressed_apply.h"
#include "step/optimizer.h"

namespace asgd {

// Shared by the ApplyTasks of one push: `on_done` runs once, on the apply
// thread of the last shard to finish its part.
struct PushCompletion {
  std::atomic<int> remaining{0};
  std::function<void()> on_done;
};

// The all-or-none verdict on one update, shared by its tasks on every shard:
// each shard votes whether its part stays finite and waits for the others.
// Every shard reaches the vote (all queues hold the same updates in the same
// order), so the wait ends.
class UpdateCheck {
 public:
  explicit UpdateCheck(int shards) : waiting_(shards) {}
  // Records one shard's verdict (and a value of its part, `local_max`,
  // whose largest over all parts max() gives) and waits for all; true when
  // all were ok.
  bool Vote(bool ok, double local_max = 0);
  // The verdict and the largest local_max, once every shard voted.
  bool passed() const;
  double max() const;

 private:
  mutable absl::Mutex mu_;
  int waiting_ ABSL_GUARDED_BY(mu_);
  bool passed_ ABSL_GUARDED_BY(mu_) = true;
  double max_ ABSL_GUARDED_BY(mu_) = 0;
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
    kAdd,       // add scale * `data` to the weights (step/add_apply.h);
                // the optimizer state is untouched
    kAdmm,      // `data` is ADMM slot `admm_slot`'s new point
                // (step/admm_apply.h); always with `check`, whose vote also
                // finds the update's largest step for the shard's
                // admm_max_change
    kSnapshot,  // copy weights and state into `snapshot` (not an update)
  };
  Kind kind = Kind::kGradient;
  // Server-local values (the whole server range); the shard reads its own
  // sub-range.
  std::shared_ptr<const std::vector<float>> data;
  // Instead of `data`, for kGradient: a compressed gradient of the whole
  // server range, decoded block by block inside the apply
  // (compressed_apply.h); no float32 gradient is materialised.
  std::shared_ptr<const CompressedGradient> compressed;
  float scale = 1.0f;  // learning-rate multiplier (kAdd: of the values)
  // The model the gradient was computed from (server-local), for delay
  // compensation; may be null.
  std::shared_ptr<const std::vector<float>> backup;
  std::shared_ptr<SnapshotTarget> snapshot;  // kSnapshot only
  int admm_slot = 0;                         // kAdmm only
  std::shared_ptr<PushCompletion> completion;
  // Set for a gradient or an add whose bound failed: check before applying (see above).
  std::shared_ptr<UpdateCheck> check;
};

class Shard {
 public:
  // Called on the apply thread after each task with (shard index, seconds).
  using AppliedCallback = std::function<void(int, double)>;

  // `weights` points at element `local_begin` of the server's weight buffer,
  // holds `size` floats and must outlive the shard. `on_applied` may be empty.
  // `keep`, when not null, is a pruned model's mask over the shard's `size`
  // weights (0: pruned; see ParamStoreOptions::keep) and must outlive it.
  // `admm_slots` point at the shard's `size` values of each ADMM slot
  // (ParamStore); they must outlive it. An assign and Restore set them to
  // the weights. `admm_max_change` is the store's max_change (0: none),
  // which an ADMM update's step is scaled to.
  Shard(int index, float* weights, int64_t local_begin, int64_t size,
        const Optimizer* optimizer, int queue_capacity,
        AppliedCallback on_applied = nullptr, const uint8_t* keep = nullptr,
        std::vector<float*> admm_slots = {}, double admm_max_change = 0);
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

  // The largest |w| and |v| of the range after the last update; read after
  // applied(), they belong to that update or a later one.
  float max_abs_w() const { return max_w_.load(std::memory_order_acquire); }
  float max_abs_v() const { return max_v_.load(std::memory_order_acquire); }

  int index() const { return index_; }
  int64_t local_begin() const { return local_begin_; }
  int64_t size() const { return size_; }

  void Close();

 private:
  void Run();
  // The apply thread's step for a compressed gradient (all or none with
  // `check`, see UpdateCheck).
  void ApplyCompressedTask(const CompressedGradient& g, UpdateCheck* check,
                           const UpdateContext& ctx);
  void ApplyAdmmTask(const ApplyTask& task);
  // Every ADMM slot := the weights (after an assign or a restore).
  void ResetAdmmSlots();

  const int index_;
  float* const weights_;
  const int64_t local_begin_;
  const int64_t size_;
  const Optimizer* const optimizer_;
  const size_t capacity_;
  const AppliedCallback on_applied_;
  const uint8_t* const keep_;  // null: not pruned
  const std::vector<float*> admm_slots_;
  const double admm_max_change_;
  std::vector<float> state_;  // optimizer state; apply thread only

  absl::Mutex mu_;
  std::deque<ApplyTask> queue_ ABSL_GUARDED_BY(mu_);
  bool closed_ ABSL_GUARDED_BY(mu_) = false;

  std::atomic<float> max_w_{0.0f};
  std::atomic<float> max_v_{0.0f};
  std::atomic<uint64_t> applied_{0};
  std::thread thread_;
};

}  // namespace asgd

#endif  // ASGD_SERVER_SHARD_H_
