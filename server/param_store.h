// ParamStore: one parameter-server process's slice of the model.
//
// The store holds the server's contiguous flat range of the model (see
// common/model_layout.h), split into num_shards Shards, each with one apply
// thread. A push is validated by the caller (the gRPC adapter reassembles and
// checks chunks into a staging buffer), then Submit() checks its version,
// assigns it the next model version and enqueues one ApplyTask per shard; the
// callback runs when every shard has applied it. Nothing is ever applied to
// only some shards: admission reserves room in every queue first.
//
// Versions: accepted() counts accepted updates; version() is the number of
// updates every shard has applied, which is what a pull reports. A push's
// staleness is accepted() at arrival minus the version it was computed from.
//
// Modes:
//  * asynchronous (sync_workers == 0): every push is its own update. Pushes
//    staler than max_staleness are dropped and the worker told to pull.
//  * synchronous (sync_workers == N): the store waits for one push from each
//    of N workers computed from the current version, applies their average
//    as one update, then answers all N. A push from an older version is
//    dropped (pull required).
// Add pushes (PushRequest::Kind::kAdd, consensus training: EASGD) are
// added to the weights as they are, in asynchronous mode only: no optimizer,
// no learning rate, the optimizer state untouched, a pruned weight left at 0.
// Like gradients they are dropped when staler than max_staleness, and scaled
// down so that no weight moves by more than max_change.
// ADMM (admm_slots N > 0): the store keeps N slot buffers over its range,
// one per worker slot, each the last point u_k = x_k + lam_k / rho its
// worker pushed (PushRequest::Kind::kAdmm), and the weights are their
// average (step/admm_apply.h): a push for slot k replaces u_k in it. Every
// slot starts as the initial model (and again after an assign or a restored
// checkpoint: the slots are not checkpointed), so the weights are the
// slots' average from the start. Such a store takes only ADMM and assign
// pushes (a gradient or an add would move the weights off the average:
// FailedPrecondition). Memory: N model slices, allocated at Create. Every
// ADMM update goes through the all-shard check (the step depends on the
// slot, which only its shards read), which also finds its largest step for
// max_change. ReadSlotEncoded serves a slot to its worker (a restarted one
// takes its dual from it).
// Update scale: the learning rate of an update is multiplied by
// f(num_minibatches) (accumulated pushes; see MinibatchLrScale) and by
// g(staleness) (StalenessLrScale). num_minibatches is at most
// max_push_minibatches.
//
// The model never becomes non-finite: an update that would make any weight
// or momentum value non-finite (or larger than kMaxMagnitude) is rejected on
// every shard (kNonFiniteUpdate), so pulls and checkpoints only ever see
// finite weights. How, at almost no cost: every shard publishes the largest
// |w| and |v| it left after each update (taken inside the apply loop), every
// push brings the largest |g| (taken by the decode), and admission keeps an
// upper bound of the weights after every admitted update (the shards' last
// maxima plus the most each later update can add). An update whose bound
// stays far below FLT_MAX is applied as is; only one whose bound fails is
// checked read-only by every shard at its turn, and applied by all or by none
// (Shard, UpdateCheck). A rejected update keeps its version number (an empty
// step).
//
// Memory: staging buffers for incoming pushes come from a pool whose budget,
// push_memory_bytes, is charged as a push's data arrives (AcquireStaging(),
// ChargeStaging(): staging_pool.h), so that a client holds what it has sent,
// not a model-sized share per push it starts. DC-ASGD's
// per-worker model copies are capped by dc_memory_bytes: the copy of the
// worker that pulled least recently is dropped to make room, and when the
// copies still held by pulls in flight leave no room the pull is served from
// the live weights without a copy. A push whose worker has no copy is applied
// without delay compensation (plain ASGD) and counted (dc_backup_misses).
//
// Delta pulls: with a plain SGD optimizer (no momentum state, no delay
// compensation) in asynchronous mode, the store logs every update it admits
// (update_log.h, at most delta_log_bytes), so that a worker that holds the
// weights exactly as of some version can be sent the updates since;
// TakeSnapshotAsync gives such exact weights without blocking the caller.
// A pruned model's updates are logged too: a worker replays them under the
// mask (keep()), which it gets with the exact weights.
//
// Thread-safety: all methods are thread-safe. Read() may run while shards
// apply updates (lock-free ASGD reads).
#ifndef ASGD_SERVER_PARAM_STORE_H_
#define ASGD_SERVER_PARAM_STORE_H_

#include <array>
#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "common/chunking.h"
#include "common/model_layout.h"
#include "common/wire_codec.h"
#include "server/shard.h"
#include "server/staging_pool.h"
#include "server/update_log.h"
#include "step/optimizer.h"

namespace asgd {

// Learning-rate multiplier for a push that averages k minibatches:
// none (1), linear (k, the seed's compensation: one update stands for k), sqrt.
enum class MinibatchLrScale { kNone, kLinear, kSqrt };
// Learning-rate multiplier for a push of staleness s: none (1),
// inverse (1 / (1 + s)), sqrt (1 / sqrt(1 + s)).
enum class StalenessLrScale { kNone, kInverse, kSqrt };
absl::StatusOr<MinibatchLrScale> ParseMinibatchLrScale(absl::string_view text);
absl::StatusOr<StalenessLrScale> ParseStalenessLrScale(absl::string_view text);

// Why a push was not applied; a bounded set, usable as a metric label.
enum class RejectReason {
  kUnknownTensor = 0,
  kBadSize,
  kBadSequence,
  kNonFinite,
  kFutureVersion,
  kBadHeader,
  kBusy,
  kIncomplete,       // stream ended without a commit
  kStale,            // dropped as too stale (answered, not an error)
  kNonFiniteUpdate,  // applying it would make the model non-finite
  kPushMemory,       // no staging memory left (push_memory_bytes)
  kPeerLimit,        // the client has too many pushes in flight
  kStalled,          // the stream made no progress for the server's timeout
  kBadEncoding,      // a compressed chunk that is malformed, of an encoding
                     // the server does not accept, or mixed with others
  kServerLimit,      // the server has too many calls in flight (--max_calls)
  kCount,
};
const char* RejectReasonName(RejectReason r);
RejectReason FromChunkError(ChunkError e);

// Monitoring hooks. Called on the thread where the event happens (RPC
// threads, shard apply threads): implementations must be thread-safe and
// cheap.
class StoreObserver {
 public:
  virtual ~StoreObserver() = default;
  // A gradient push was admitted with this staleness.
  virtual void OnPushAccepted(uint64_t worker_id, uint64_t staleness) = 0;
  // An update is applied on every shard; `version` is the store's version.
  virtual void OnPushApplied(uint64_t worker_id, uint64_t version) = 0;
  virtual void OnPushRejected(RejectReason reason) = 0;
  // One shard applied one update in `seconds`.
  virtual void OnShardApplied(int shard, double seconds) = 0;
  // DC-ASGD: a push was applied without delay compensation because its
  // worker's model copy was not kept.
  virtual void OnDcBackupMiss() {}
  // An update's step was scaled down to max_change.
  virtual void OnUpdateClipped() {}
};

// The most ADMM slots one store keeps (ParamStoreOptions::admm_slots).
inline constexpr int kMaxAdmmSlots = 1024;

struct ParamStoreOptions {
  std::vector<TensorSpec> tensors;
  int server_index = 0;
  int num_servers = 1;
  int num_shards = 1;
  OptimizerOptions optimizer;
  // Updates admitted but not yet applied by every shard; beyond it Submit()
  // answers Unavailable ("busy").
  int queue_capacity = 32;
  // A push staler than this is dropped and the worker told to pull (0: never).
  uint64_t max_staleness = 0;
  MinibatchLrScale minibatch_lr_scale = MinibatchLrScale::kLinear;
  StalenessLrScale staleness_lr_scale = StalenessLrScale::kNone;
  // Max-change: the most one update may move any weight by its gradient
  // term, learning rate (scheduled, times the minibatch and staleness
  // scales) times the largest |gradient value|. An update that would move
  // one further has its step scaled down to exactly this (the whole update,
  // so its direction is kept), and is counted (updates_clipped). Finite is
  // not the same as sane: a finite gradient of 1e35 would still wreck the
  // model. 0: no bound. With momentum the bound holds for what the update
  // adds to the velocity; weight decay and the velocity already there are
  // not the update's doing and are not scaled. An add moves a weight by at
  // most its largest |value|, and is scaled down the same way.
  double max_change = 0;
  // 0: asynchronous. N > 0: synchronous over N workers.
  int sync_workers = 0;
  // The most minibatches one push may average (it scales the step).
  int max_push_minibatches = 64;
  // Whether pushes may carry compressed gradients (1-bit, top-k), and the
  // most elements one compressed chunk may cover.
  bool compressed_pushes = true;
  int64_t max_compressed_chunk_elements = int64_t{1} << 22;
  // Memory for staging pushes in flight (received, or waiting to be
  // applied); must hold at least one push (range().size() floats).
  int64_t push_memory_bytes = int64_t{1} << 30;
  // Memory for DC-ASGD's per-worker model copies (with dc_lambda > 0).
  int64_t dc_memory_bytes = int64_t{1} << 30;
  // ADMM's worker slots (see above); 0: none. At most kMaxAdmmSlots.
  int admm_slots = 0;
  // Memory for the log of recent compressed updates that delta pulls replay
  // (0: no delta pulls). Used only where delta pulls are possible (above).
  int64_t delta_log_bytes = int64_t{64} << 20;
  // A pruned model's mask over the whole flat model (model/prune_mask.h:
  // 0 for a pruned weight), or null: the shards give pruned weights gradient
  // 0 in every update (UpdateContext::keep) and zero them in an assign, so
  // they stay 0. Shared, read-only.
  std::shared_ptr<const std::vector<uint8_t>> keep;
  int64_t max_chunk_elements = kDefaultMaxChunkElements;
  // Served by DescribeModel so workers build the same model (e.g.
  // {"learning_rate", "0.05"}); the store itself does not read them.
  std::map<std::string, std::string> attributes;
  // The model: a serialized asgd.v1.ModelSpec that DescribeModel publishes,
  // and its identity (e.g. a digest of the spec), part of the layout
  // fingerprint and so of every checkpoint. Opaque to the store.
  std::string model_spec;
  std::string model_id;
  // Monitoring hooks (may be null); must outlive the store.
  StoreObserver* observer = nullptr;
};

struct PushRequest {
  uint64_t worker_id = 0;
  uint64_t base_version = 0;
  int num_minibatches = 1;
  enum class Kind {
    kGradient,  // an optimizer step with `values` (or `compressed`)
    kAssign,    // set the weights to `values`; resets the optimizer state
    kAdd,       // add `values` to the weights as they are (consensus
                // training); no optimizer step, its state untouched
    kAdmm,      // `values` is slot `admm_slot`'s new point (see above)
  };
  Kind kind = Kind::kGradient;
  int admm_slot = 0;  // kAdmm: in [0, admm_slots)
  // Server-local values (range().size() floats): a gradient, or weights.
  std::shared_ptr<const std::vector<float>> values;
  // Instead of `values`, a gradient only: a compressed gradient of the whole
  // range (validated chunks, see compressed_apply.h), applied by the shards
  // without decoding it to a float32 buffer.
  std::shared_ptr<const CompressedGradient> compressed;
  // The largest |value| (PushAssembler gets it from the decode); negative:
  // not known, Submit() scans the values (compressed: its max_abs).
  float max_abs = -1.0f;
};

struct PushResult {
  bool applied = false;  // false: dropped as too stale, or `error`
  uint64_t staleness = 0;
  uint64_t version = 0;        // version assigned (applied) or current (dropped)
  // Not OK when the update was refused after admission (InvalidArgument:
  // it would have made the model non-finite); nothing was applied.
  absl::Status error;
};

// A consistent copy of a store: the weights and optimizer state (server-local
// ranges; state empty without momentum) after exactly `version` updates.
struct StoreSnapshot {
  uint64_t version = 0;
  std::vector<float> weights;
  std::vector<float> state;
};

struct ParamStoreStats {
  uint64_t pushes_applied = 0;
  uint64_t pushes_dropped_stale = 0;
  std::array<uint64_t, static_cast<int>(RejectReason::kCount)> rejected{};
  uint64_t pulls = 0;
  // Delta pulls answered with updates only (see delta_pulls.h).
  uint64_t update_pulls = 0;
  // Updates that went through the all-shard check (their bound failed).
  uint64_t updates_checked = 0;
  // Updates whose step was scaled down to max_change, and the largest step
  // any update asked for (before that).
  uint64_t updates_clipped = 0;
  double largest_change = 0;
  // DC-ASGD: pushes applied without compensation; copies kept now.
  uint64_t dc_backup_misses = 0;
  int64_t dc_backups = 0;
  int64_t dc_backup_bytes = 0;  // of the copies alive (kept or being pulled)
  // Staging buffers that exist now (in use or idle).
  int64_t staging_buffers = 0;
  // Bytes of staged push data charged to the budget now, and the budget.
  int64_t staging_bytes = 0;
  int64_t staging_bytes_max = 0;
};

class ParamStore {
 public:
  // `initial_model` is the whole flat model (layout order); the store keeps
  // its own range. InvalidArgument for a bad layout, optimizer or size.
  static absl::StatusOr<std::unique_ptr<ParamStore>> Create(
      const ParamStoreOptions& options, absl::Span<const float> initial_model);
  ~ParamStore();

  const ModelLayout& layout() const { return layout_; }
  FlatRange range() const { return range_; }
  int server_index() const { return options_.server_index; }
  const ParamStoreOptions& options() const { return options_; }
  // A pruned model's mask over range() (options().keep's), or null.
  const uint8_t* keep() const {
    return options_.keep != nullptr ? options_.keep->data() + range_.begin
                                    : nullptr;
  }

  uint64_t version() const;
  uint64_t accepted() const { return accepted_.load(std::memory_order_acquire); }

  // Copies server-local elements [begin, begin + n) into `out`.
  void Read(int64_t begin, int64_t n, float* out) const;
  // The same elements encoded as `dtype` (n * WireBytes(dtype) bytes).
  void ReadEncoded(int64_t begin, int64_t n, WireDtype dtype, char* out) const;
  // The same elements of ADMM slot `slot` (in [0, admm_slots)), read like
  // the weights while its shards may write them.
  void ReadSlotEncoded(int slot, int64_t begin, int64_t n, WireDtype dtype,
                       char* out) const;
  int admm_slots() const { return options_.admm_slots; }
  // OK when this store takes a push of `kind` (for slot `admm_slot`, an
  // ADMM push); FailedPrecondition for an ADMM push to a store without
  // slots or a gradient or add push to one with them, InvalidArgument for a
  // slot out of range. Counts nothing.
  absl::Status CheckPushKind(PushRequest::Kind kind, int64_t admm_slot) const;

  // A buffer of range().size() floats (unspecified contents) for staging
  // one incoming push, charged `bytes` of the push memory budget at once;
  // null when they do not fit. Released buffers are reused, and their
  // charge given back. Thread-safe.
  std::shared_ptr<std::vector<float>> AcquireStaging(int64_t bytes) const {
    return staging_.AcquireCharged(bytes);
  }
  // Charges `bytes` more to a buffer from AcquireStaging() (before they are
  // written into it); false, and nothing charged, when the budget would be
  // exceeded. Thread-safe.
  bool ChargeStaging(const std::vector<float>* buffer, int64_t bytes) const {
    return staging_.Charge(buffer, bytes);
  }
  // A copy of the whole local range.
  std::vector<float> Snapshot() const;

  // For a pull by `worker_id`: when the optimizer uses delay compensation,
  // returns a snapshot to serve and remembers it as the worker's backup model
  // (within dc_memory_bytes, see above); otherwise null (serve the live
  // weights).
  std::shared_ptr<const std::vector<float>> SnapshotForPull(uint64_t worker_id);

  // Accepts a complete, validated update (see PushRequest). On OK, `done`
  // runs exactly once with the result: after every shard applied (or, with
  // result.error, refused) it, or at once when dropped as stale. Errors
  // (nothing enqueued, `done` not run): InvalidArgument for a wrong size,
  // too many minibatches, non-finite values, an update that cannot stay
  // finite, a compressed assign, add or ADMM point, an add in synchronous
  // mode, an ADMM slot out of range, or a second push from one worker for
  // one synchronous step; FailedPrecondition for a push of a kind the store
  // does not take (CheckPushKind); Aborted for a version from the future
  // (pull again); Unavailable when shut down, or busy (with
  // Refusal::kBusy), or (a compressed push in synchronous mode, which is
  // decoded to float32 to be summed) with no staging memory
  // (Refusal::kPushMemory).
  absl::Status Submit(PushRequest request,
                      std::function<void(const PushResult&)> done);

  // A consistent snapshot (for checkpoints): queued behind every update
  // admitted so far, so it waits for them to be applied; updates admitted
  // later are not in it. Unavailable after Shutdown().
  absl::StatusOr<StoreSnapshot> TakeSnapshot();
  // The same without waiting: `done` runs once, on the shard thread that
  // copied last (or at once with Unavailable after Shutdown()); it must not
  // block.
  void TakeSnapshotAsync(
      std::function<void(absl::StatusOr<StoreSnapshot>)> done);

  // The log of recent updates for delta pulls; null when the store does not
  // keep one (see above).
  const UpdateLog* update_log() const { return log_.get(); }

  // Loads a snapshot (a restored checkpoint) before any update: weights,
  // optimizer state and version. InvalidArgument on a size mismatch or for
  // non-finite values, FailedPrecondition once updates were accepted.
  absl::Status Restore(const StoreSnapshot& snapshot);

  // Counts a push rejected before Submit (e.g. by chunk validation).
  void CountRejected(RejectReason reason);
  void CountPull();
  void CountUpdatePull();
  ParamStoreStats stats() const;

  // Stops admitting pushes, applies what is queued, joins the apply threads.
  void Shutdown();

 private:
  struct SyncWaiter {
    uint64_t worker_id;
    std::function<void(const PushResult&)> done;
  };

  ParamStore(const ParamStoreOptions& options, ModelLayout layout,
             Optimizer optimizer);

  // A kept DC-ASGD model copy and its largest |value|.
  struct Backup {
    std::shared_ptr<const std::vector<float>> values;
    float max_abs = 0.0f;
    uint64_t last_use = 0;  // backup_clock_ at its pull
  };
  // One admitted update as the admission bound sees it.
  struct UpdateBound {
    bool assign = false;
    int admm_slot = -1;  // an ADMM update's slot
    float scale = 1.0f;
    double max_g = 0;        // largest |value| of the update
    double max_backup = -1;  // DC-ASGD copy's largest |value|; < 0: none
  };

  float UpdateScale(int num_minibatches, uint64_t staleness) const;
  // `scale` of an update of largest |g| `max_g`, lowered so that the update
  // moves no weight by more than max_change (see ParamStoreOptions), and
  // counted when it was. The update will be version accepted_ + 1. Needs
  // submit_mu_.
  float ClipToMaxChangeLocked(float scale, double max_g)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(submit_mu_);
  // The same for an update that moves a weight by at most `change` at
  // `scale` 1 (an add: its largest |value|).
  float ClipChangeLocked(float scale, double change)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(submit_mu_);
  // Books an applied ADMM update's largest step (before max_change) in
  // largest_change and, when the shards scaled it down, updates_clipped.
  void CountAdmmChange(double change);
  // Bounds of the weights and momentum after every admitted update:
  // max over shards of (its last maxima + what the updates it has not
  // applied yet can add). Needs submit_mu_.
  void ProjectedMaxLocked(double* max_w, double* max_v)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(submit_mu_);
  // Admits one update into every shard queue: the next version, with a
  // check task when its bound fails. `on_applied` gets the version and
  // whether the shards applied it. Needs submit_mu_.
  absl::Status EnqueueLocked(
      uint64_t worker_id, ApplyTask::Kind kind,
      std::shared_ptr<const std::vector<float>> values,
      std::shared_ptr<const CompressedGradient> compressed,
      const UpdateBound& bound,
      std::shared_ptr<const std::vector<float>> backup,
      std::function<void(uint64_t version, absl::Status error)> on_applied)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(submit_mu_);
  // Submit's checks that need no lock: sizes, header, finite values (a
  // compressed push under synchronous training is decoded here); counts a
  // refusal.
  absl::Status CheckPush(PushRequest* request);
  // Submit's asynchronous gradient step at `staleness`: its scale and
  // bound, the worker's DC-ASGD backup, then EnqueueLocked.
  absl::Status SubmitGradientLocked(PushRequest request, uint64_t staleness,
                                    UpdateBound bound,
                                    std::function<void(const PushResult&)> done)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(submit_mu_);
  // Submit's asynchronous add at `staleness` (the values as they are,
  // scaled down to max_change) or ADMM push (scaled by the shards), then
  // EnqueueLocked.
  absl::Status SubmitAddLocked(PushRequest request, uint64_t staleness,
                               UpdateBound bound,
                               std::function<void(const PushResult&)> done)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(submit_mu_);
  absl::Status SubmitSyncLocked(PushRequest& request,
                                std::function<void(const PushResult&)>& done,
                                bool* dropped)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(submit_mu_);

  const ParamStoreOptions options_;
  const ModelLayout layout_;
  const FlatRange range_;
  const Optimizer optimizer_;
  std::vector<float> weights_;  // written only by shard threads
  // ADMM's slot buffers (admm_slots of range().size()); written only by
  // shard threads, each on its own sub-range.
  std::vector<std::vector<float>> slots_;
  mutable StagingPool staging_;
  std::vector<std::unique_ptr<Shard>> shards_;
  std::unique_ptr<UpdateLog> log_;  // delta pulls; null when off

  absl::Mutex submit_mu_;  // orders admission, version assignment, enqueue
  bool shut_down_ ABSL_GUARDED_BY(submit_mu_) = false;
  // Synchronous mode: the sum of this step's gradients and who sent them.
  std::vector<float> sync_sum_ ABSL_GUARDED_BY(submit_mu_);
  std::vector<SyncWaiter> sync_waiters_ ABSL_GUARDED_BY(submit_mu_);

  // Admission bound (see above): prefix_[i] holds the sums over versions
  // prefix_base_ + 1 .. prefix_base_ + i of what each update can add to
  // |w| and to |v|; versions before every shard's applied() are dropped.
  uint64_t prefix_base_ ABSL_GUARDED_BY(submit_mu_) = 0;
  std::deque<std::pair<double, double>> prefix_ ABSL_GUARDED_BY(submit_mu_);
  // Synchronous mode: the largest |value| of this step's gradients.
  double sync_max_abs_ ABSL_GUARDED_BY(submit_mu_) = 0;
  double sync_sum_bound_ ABSL_GUARDED_BY(submit_mu_) = 0;

  mutable absl::Mutex backup_mu_;
  absl::flat_hash_map<uint64_t, Backup> backups_ ABSL_GUARDED_BY(backup_mu_);
  uint64_t backup_clock_ ABSL_GUARDED_BY(backup_mu_) = 0;
  // Bytes of every model copy alive, kept or still read by a pull; the
  // copies' deleters decrement it (and may outlive the store).
  const std::shared_ptr<std::atomic<int64_t>> backup_bytes_;
  std::atomic<uint64_t> dc_backup_misses_{0};
  std::atomic<uint64_t> updates_checked_{0};
  std::atomic<uint64_t> updates_clipped_{0};
  std::atomic<double> largest_change_{0};  // raised by compare-exchange

  std::atomic<uint64_t> accepted_{0};
  std::atomic<int> in_flight_{0};

  std::atomic<uint64_t> applied_count_{0};
  std::atomic<uint64_t> dropped_stale_{0};
  std::atomic<uint64_t> pulls_{0};
  std::atomic<uint64_t> update_pulls_{0};
  std::array<std::atomic<uint64_t>, static_cast<int>(RejectReason::kCount)>
      rejected_{};
};

}  // namespace asgd

#endif  // ASGD_SERVER_PARAM_STORE_H_
