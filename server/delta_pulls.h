// DeltaPulls: decides what a delta pull (proto PullRequest.delta) sends, for
// a store that keeps an update log (param_store.h).
//
// A delta pull must leave the worker's copy of the server's slice exactly
// equal to the weights at the reply's version, so that the worker can ask
// for the updates since next time. Three answers, cheapest first:
//   updates  the worker holds an exact copy at version b and the log still
//            has every update b+1 .. v, replayable, in at most half the bytes
//            of the float32 weights: only those are sent (a 1-bit update of
//            the seed DNN is 3% of its weights);
//   base     weights copied at one consistent version b (a "base", taken
//            through the shards' queues with ParamStore::TakeSnapshotAsync)
//            and the updates b+1 .. v. A base serves every worker that needs
//            one until an update it cannot be brought past (an unreplayable
//            one, or one dropped from the log); a new one is taken then, at
//            most one at a time, and only when the newest update is
//            replayable (with float32 pushes a base would be stale at once);
//   weights  a plain pull (read while updates are applied): the worker holds
//            no exact copy afterwards and asks for a base next time.
// A pruned model: the base's weights go with the mask (PullWriter), and a
// worker whose request does not say it replays the mask gets weights: its
// replay would move pruned weights.
// Lineage: versions restart with a server process (or go back to a
// checkpoint's), so the same version may name other weights after a restart;
// every exact reply carries a random number drawn when this object was made,
// and a copy that does not name it gets a base.
// Memory: bases alive (the current one and older ones still being sent) are
// at most max_base_bytes; beyond it a pull gets weights instead.
//
// Thread-safety: thread-safe. The store must outlive it.
#ifndef ASGD_SERVER_DELTA_PULLS_H_
#define ASGD_SERVER_DELTA_PULLS_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "server/param_store.h"
#include "server/update_log.h"

namespace asgd {

// What one delta pull sends: `base`'s weights first when set, then
// `updates`; the copy is then exactly the weights at `version`.
struct DeltaPlan {
  std::shared_ptr<const StoreSnapshot> base;
  std::vector<std::shared_ptr<const LoggedUpdate>> updates;
  uint64_t version = 0;
};

class DeltaPulls {
 public:
  // `store` must keep an update log (update_log() != null).
  DeltaPulls(ParamStore* store, int64_t max_base_bytes);

  enum class Answer {
    kPlan,      // *plan says what to send
    kNeedBase,  // call RequestBase
    kWeights,   // send a plain pull
  };
  // The answer for a worker whose exact copy is at `held` (has_copy) and
  // came from `lineage`, or that has none. A copy from another lineage
  // (another server process) counts as none. `replays_mask`: the worker
  // replays updates under a pruned model's mask (proto PullRequest.
  // replays_mask); without it a pruned store answers kWeights.
  Answer Plan(bool has_copy, uint64_t held, uint64_t lineage, bool replays_mask,
              DeltaPlan* plan);

  // A random number drawn at construction, sent with every exact reply.
  uint64_t lineage() const { return lineage_; }

  // Takes a new base (or joins the one being taken) and runs `ready` once
  // with the plan built on it, or with nullopt (send weights): on a shard
  // thread, or at once on the caller's thread when no base can be taken.
  // `ready` must not block, and may run before RequestBase returns: the
  // caller must not hold a lock that `ready` takes.
  void RequestBase(std::function<void(std::optional<DeltaPlan>)> ready);

 private:
  // What the snapshot callback (on a shard thread, possibly after this
  // object is gone) reaches.
  struct Shared {
    ParamStore* store;
    int64_t max_update_bytes;  // per pull: half the float32 weights
    absl::Mutex mu;
    std::shared_ptr<const StoreSnapshot> base ABSL_GUARDED_BY(mu);
    bool taking ABSL_GUARDED_BY(mu) = false;
    std::vector<std::function<void(std::optional<DeltaPlan>)>> waiting
        ABSL_GUARDED_BY(mu);
  };
  // The plan on `base` up to the store's version now, if the log has it.
  static std::optional<DeltaPlan> PlanOn(
      const Shared& shared, std::shared_ptr<const StoreSnapshot> base);

  const int64_t max_base_bytes_;
  const uint64_t lineage_;
  const std::shared_ptr<Shared> shared_;
  // Bytes of the bases alive; their deleters decrement it (and may outlive
  // this object).
  const std::shared_ptr<std::atomic<int64_t>> base_bytes_;
};

}  // namespace asgd

#endif  // ASGD_SERVER_DELTA_PULLS_H_
