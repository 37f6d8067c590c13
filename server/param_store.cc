#include "server/param_store.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "common/refusal.h"
#include "common/status_macros.h"

namespace asgd {
namespace {

// Idle staging buffers a store keeps for reuse: enough for a few pushes in
// flight, at most 512 MiB.
int StagingBuffersKept(int64_t elements) {
  const int64_t bytes = std::max<int64_t>(elements, 1) * sizeof(float);
  return static_cast<int>(
      std::clamp<int64_t>((int64_t{512} << 20) / bytes, 1, 8));
}

// *value = max(*value, v), from any thread.
void RaiseTo(std::atomic<double>* value, double v) {
  double now = value->load(std::memory_order_relaxed);
  while (v > now &&
         !value->compare_exchange_weak(now, v, std::memory_order_relaxed)) {
  }
}

}  // namespace

const char* RejectReasonName(RejectReason r) {
  switch (r) {
    case RejectReason::kUnknownTensor: return "unknown_tensor";
    case RejectReason::kBadSize: return "bad_size";
    case RejectReason::kBadSequence: return "bad_sequence";
    case RejectReason::kNonFinite: return "nonfinite";
    case RejectReason::kFutureVersion: return "future_version";
    case RejectReason::kBadHeader: return "bad_header";
    case RejectReason::kBusy: return "busy";
    case RejectReason::kIncomplete: return "incomplete";
    case RejectReason::kStale: return "stale";
    case RejectReason::kNonFiniteUpdate:
      return "nonfinite_update";
    case RejectReason::kPushMemory:
      return "push_memory";
    case RejectReason::kPeerLimit:
      return "peer_limit";
    case RejectReason::kStalled:
      return "stalled";
    case RejectReason::kBadEncoding:
      return "bad_encoding";
    case RejectReason::kServerLimit:
      return "server_limit";
    case RejectReason::kCount: break;
  }
  return "unknown";
}

absl::StatusOr<MinibatchLrScale> ParseMinibatchLrScale(absl::string_view text) {
  if (text == "none") return MinibatchLrScale::kNone;
  if (text == "linear") return MinibatchLrScale::kLinear;
  if (text == "sqrt") return MinibatchLrScale::kSqrt;
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown minibatch learning-rate scale '", text,
      "' (want none, linear or sqrt)"));
}

absl::StatusOr<StalenessLrScale> ParseStalenessLrScale(absl::string_view text) {
  if (text == "none") return StalenessLrScale::kNone;
  if (text == "inverse") return StalenessLrScale::kInverse;
  if (text == "sqrt") return StalenessLrScale::kSqrt;
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown staleness learning-rate scale '", text,
      "' (want none, inverse or sqrt)"));
}

RejectReason FromChunkError(ChunkError e) {
  switch (e) {
    case ChunkError::kUnknownTensor: return RejectReason::kUnknownTensor;
    case ChunkError::kBadSize: return RejectReason::kBadSize;
    case ChunkError::kNonFinite: return RejectReason::kNonFinite;
    case ChunkError::kBadSequence:
    case ChunkError::kNone: break;
  }
  return RejectReason::kBadSequence;
}

absl::StatusOr<std::unique_ptr<ParamStore>> ParamStore::Create(
    const ParamStoreOptions& options, absl::Span<const float> initial_model) {
  ASGD_ASSIGN_OR_RETURN(
      ModelLayout layout,
      ModelLayout::Create(options.tensors, options.num_servers,
                          options.num_shards, options.model_id));
  if (options.server_index < 0 || options.server_index >= options.num_servers) {
    return absl::InvalidArgumentError(
        absl::StrCat("server_index ", options.server_index,
                     " is outside [0, num_servers=", options.num_servers, ")"));
  }
  if (static_cast<int64_t>(initial_model.size()) != layout.total_size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("initial model has ", initial_model.size(),
                     " values, the layout needs ", layout.total_size()));
  }
  if (options.keep != nullptr &&
      static_cast<int64_t>(options.keep->size()) != layout.total_size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("the pruning mask has ", options.keep->size(),
                     " flags, the model ", layout.total_size(), " weights"));
  }
  if (options.queue_capacity < 1 || options.max_chunk_elements < 1 ||
      options.sync_workers < 0 || options.max_push_minibatches < 1) {
    return absl::InvalidArgumentError(
        "queue_capacity, max_chunk_elements and max_push_minibatches must be "
        "at least 1, sync_workers at least 0");
  }
  if (options.admm_slots < 0 || options.admm_slots > kMaxAdmmSlots) {
    return absl::InvalidArgumentError(absl::StrCat("admm_slots must be in [0, ",
                                                   kMaxAdmmSlots, "], got ",
                                                   options.admm_slots));
  }
  if (options.admm_slots > 0 && options.sync_workers > 0) {
    return absl::InvalidArgumentError(
        "ADMM slots in a synchronous pool: ADMM's average is asynchronous; "
        "start the pool without --sync_workers");
  }
  const int64_t push_bytes =
      layout.ServerRange(options.server_index).size() * int64_t{sizeof(float)};
  if (options.push_memory_bytes < push_bytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the memory for pushes in flight (", options.push_memory_bytes,
        " bytes) holds no push of this server's ", push_bytes,
        " bytes: raise --push_memory_mb to at least ",
        (push_bytes + (1 << 20) - 1) >> 20));
  }
  ASGD_ASSIGN_OR_RETURN(Optimizer optimizer,
                        Optimizer::Create(options.optimizer));
  auto store = std::unique_ptr<ParamStore>(
      new ParamStore(options, std::move(layout), optimizer));
  const FlatRange r = store->range_;
  std::copy(initial_model.begin() + r.begin, initial_model.begin() + r.end,
            store->weights_.begin());
  // Every slot starts as the model, which is then their average.
  store->slots_.assign(options.admm_slots, store->weights_);
  for (int k = 0; k < options.num_shards; ++k) {
    const FlatRange s = store->layout_.ShardRange(options.server_index, k);
    const int64_t local = s.begin - r.begin;
    Shard::AppliedCallback on_applied;
    if (StoreObserver* observer = options.observer; observer != nullptr) {
      on_applied = [observer](int shard, double seconds) {
        observer->OnShardApplied(shard, seconds);
      };
    }
    const uint8_t* keep = store->options_.keep != nullptr
                              ? store->options_.keep->data() + s.begin
                              : nullptr;
    std::vector<float*> slots;
    for (std::vector<float>& slot : store->slots_) {
      slots.push_back(slot.data() + local);
    }
    store->shards_.push_back(std::make_unique<Shard>(
        k, store->weights_.data() + local, local, s.size(), &store->optimizer_,
        options.queue_capacity, std::move(on_applied), keep, std::move(slots),
        options.max_change));
  }
  return store;
}

ParamStore::ParamStore(const ParamStoreOptions& options, ModelLayout layout,
                       Optimizer optimizer)
    : options_(options),
      layout_(std::move(layout)),
      range_(layout_.ServerRange(options.server_index)),
      optimizer_(optimizer),
      weights_(range_.size()),
      staging_(range_.size(), StagingBuffersKept(range_.size()),
               options.push_memory_bytes),
      backup_bytes_(std::make_shared<std::atomic<int64_t>>(0)) {
  prefix_.push_back({0.0, 0.0});
  if (options.delta_log_bytes > 0 && options.sync_workers == 0 &&
      !optimizer_.has_state() && !optimizer_.needs_backup()) {
    log_ = std::make_unique<UpdateLog>(options.delta_log_bytes);
  }
}

ParamStore::~ParamStore() { Shutdown(); }

uint64_t ParamStore::version() const {
  uint64_t v = std::numeric_limits<uint64_t>::max();
  for (const auto& shard : shards_) v = std::min(v, shard->applied());
  return shards_.empty() ? 0 : v;
}

void ParamStore::Read(int64_t begin, int64_t n, float* out) const {
  std::memcpy(out, weights_.data() + begin, n * sizeof(float));
}

void ParamStore::ReadEncoded(int64_t begin, int64_t n, WireDtype dtype,
                             char* out) const {
  EncodeFloats(weights_.data() + begin, n, dtype, out);
}

void ParamStore::ReadSlotEncoded(int slot, int64_t begin, int64_t n,
                                 WireDtype dtype, char* out) const {
  EncodeFloats(slots_[slot].data() + begin, n, dtype, out);
}

std::vector<float> ParamStore::Snapshot() const {
  std::vector<float> copy(weights_.size());
  Read(0, copy.size(), copy.data());
  return copy;
}

std::shared_ptr<const std::vector<float>> ParamStore::SnapshotForPull(
    uint64_t worker_id) {
  if (!optimizer_.needs_backup()) return nullptr;
  const int64_t bytes = range_.size() * int64_t{sizeof(float)};
  {
    absl::MutexLock lock(&backup_mu_);
    // The worker's older copy goes (freed once no pull reads it), then the
    // copies of the workers that pulled least recently, until one fits.
    // Only copies that nothing else holds free memory when dropped; new
    // references are only taken under backup_mu_, so use_count() == 1 stays
    // true while it is held.
    backups_.erase(worker_id);
    while (backup_bytes_->load() + bytes > options_.dc_memory_bytes) {
      auto oldest = backups_.end();
      for (auto it = backups_.begin(); it != backups_.end(); ++it) {
        if (it->second.values.use_count() != 1) continue;
        if (oldest == backups_.end() ||
            it->second.last_use < oldest->second.last_use) {
          oldest = it;
        }
      }
      if (oldest == backups_.end()) break;
      backups_.erase(oldest);
    }
    // Copies still read by pulls in flight may leave no room: serve this
    // pull from the live weights; the worker's push falls back to plain
    // ASGD.
    if (backup_bytes_->load() + bytes > options_.dc_memory_bytes) {
      return nullptr;
    }
    backup_bytes_->fetch_add(bytes);  // released by the copy's deleter
  }
  auto* copy = new std::vector<float>(Snapshot());
  std::shared_ptr<const std::vector<float>> snapshot(
      copy, [counter = backup_bytes_, bytes](const std::vector<float>* p) {
        delete p;
        counter->fetch_sub(bytes);
      });
  const float max_abs = MaxAbs(copy->data(), copy->size());
  absl::MutexLock lock(&backup_mu_);
  backups_[worker_id] = Backup{snapshot, max_abs, ++backup_clock_};
  return snapshot;
}

float ParamStore::UpdateScale(int num_minibatches, uint64_t staleness) const {
  float scale = 1.0f;
  switch (options_.minibatch_lr_scale) {
    case MinibatchLrScale::kNone: break;
    case MinibatchLrScale::kLinear: scale = num_minibatches; break;
    case MinibatchLrScale::kSqrt: scale = std::sqrt(float(num_minibatches)); break;
  }
  switch (options_.staleness_lr_scale) {
    case StalenessLrScale::kNone: break;
    case StalenessLrScale::kInverse: scale /= 1.0f + staleness; break;
    case StalenessLrScale::kSqrt: scale /= std::sqrt(1.0f + staleness); break;
  }
  return scale;
}

float ParamStore::ClipToMaxChangeLocked(float scale, double max_g) {
  // The shards apply version k at their step k - 1: this update's step is
  // accepted_.
  const double lr =
      optimizer_.LearningRate(accepted_.load(std::memory_order_acquire));
  return ClipChangeLocked(scale, lr * scale * max_g);
}

float ParamStore::ClipChangeLocked(float scale, double change) {
  RaiseTo(&largest_change_, change);
  if (options_.max_change <= 0 || !(change > options_.max_change)) {
    return scale;
  }
  updates_clipped_.fetch_add(1, std::memory_order_relaxed);
  if (options_.observer != nullptr) options_.observer->OnUpdateClipped();
  // Rounded down, so that lr * scale * max_g stays within the bound in
  // float arithmetic too.
  const double clipped = scale * (options_.max_change / change);
  return std::nextafter(static_cast<float>(clipped), 0.0f);
}

void ParamStore::CountAdmmChange(double change) {
  RaiseTo(&largest_change_, change);
  if (options_.max_change > 0 && change > options_.max_change) {
    updates_clipped_.fetch_add(1, std::memory_order_relaxed);
    if (options_.observer != nullptr) options_.observer->OnUpdateClipped();
  }
}

void ParamStore::ProjectedMaxLocked(double* max_w, double* max_v) {
  // Versions every shard has applied need no bound any more.
  uint64_t oldest = std::numeric_limits<uint64_t>::max();
  for (const auto& shard : shards_) oldest = std::min(oldest, shard->applied());
  while (prefix_base_ < oldest && prefix_.size() > 1) {
    prefix_.pop_front();
    ++prefix_base_;
  }
  const auto& [sum_w, sum_v] = prefix_.back();
  *max_w = 0;
  *max_v = 0;
  for (const auto& shard : shards_) {
    // applied() first: the maxima read after it are from that update or a
    // later one, so adding the updates after applied() over-counts at worst.
    const uint64_t applied = std::max(shard->applied(), prefix_base_);
    const auto& [done_w, done_v] = prefix_[applied - prefix_base_];
    *max_w = std::max(*max_w, shard->max_abs_w() + (sum_w - done_w));
    *max_v = std::max(*max_v, shard->max_abs_v() + (sum_v - done_v));
  }
}

absl::Status ParamStore::EnqueueLocked(
    uint64_t worker_id, ApplyTask::Kind kind,
    std::shared_ptr<const std::vector<float>> values,
    std::shared_ptr<const CompressedGradient> compressed,
    const UpdateBound& bound,
    std::shared_ptr<const std::vector<float>> backup,
    std::function<void(uint64_t version, absl::Status error)> on_applied) {
  if (in_flight_.load(std::memory_order_acquire) >= options_.queue_capacity) {
    CountRejected(RejectReason::kBusy);
    return WithRefusal(
        absl::UnavailableError(
            "server busy: apply queues are full; retry or compute another "
            "minibatch"),
        Refusal::kBusy);
  }
  // What this update can add to max |w| and max |v| on any shard, and
  // whether that stays provably finite; if not, every shard checks it.
  double add_w, add_v;
  std::shared_ptr<UpdateCheck> check;
  if (bound.assign) {
    if (!(bound.max_g < kMaxMagnitude)) {
      CountRejected(RejectReason::kNonFiniteUpdate);
      return absl::InvalidArgumentError(
          absl::StrCat("assigned weights reach ", bound.max_g,
                       ", more than the largest "
                       "magnitude the server keeps (",
                       kMaxMagnitude, "); nothing applied"));
    }
    add_w = bound.max_g;  // after it |w| <= max_g
    add_v = 0;
  } else if (kind == ApplyTask::Kind::kAdmm) {
    // Its step depends on the slot, which only the shards read: always
    // checked; after it |w| stays within kMaxMagnitude.
    check = std::make_shared<UpdateCheck>(static_cast<int>(shards_.size()));
    updates_checked_.fetch_add(1, std::memory_order_relaxed);
    add_w = kMaxMagnitude;
    add_v = 0;
  } else if (kind == ApplyTask::Kind::kAdd) {
    double max_w, max_v;
    ProjectedMaxLocked(&max_w, &max_v);
    add_w = static_cast<double>(bound.scale) * bound.max_g;
    add_v = 0;
    if (!(max_w + add_w < kMaxMagnitude)) {
      // Applied only if every part stays within kMaxMagnitude.
      check = std::make_shared<UpdateCheck>(static_cast<int>(shards_.size()));
      updates_checked_.fetch_add(1, std::memory_order_relaxed);
      add_w = kMaxMagnitude;
    }
  } else {
    StepInputs in;
    ProjectedMaxLocked(&in.max_w, &in.max_v);
    in.max_g = bound.max_g;
    in.max_backup = bound.max_backup;
    in.scale = bound.scale;
    const StepBound step = optimizer_.Bound(in);
    if (step.safe()) {
      add_w = step.w_step;
      add_v = optimizer_.has_state() ? step.g_eff : 0;
    } else {
      // Applied only if every part stays within kMaxMagnitude: after it,
      // |w| and |v| are at most that (or unchanged).
      check = std::make_shared<UpdateCheck>(static_cast<int>(shards_.size()));
      updates_checked_.fetch_add(1, std::memory_order_relaxed);
      add_w = kMaxMagnitude;
      add_v = optimizer_.has_state() ? kMaxMagnitude : 0;
    }
  }
  in_flight_.fetch_add(1, std::memory_order_acq_rel);
  const uint64_t version = accepted_.fetch_add(1, std::memory_order_acq_rel) + 1;
  prefix_.push_back(
      {prefix_.back().first + add_w, prefix_.back().second + add_v});
  if (log_ != nullptr) {
    // The shards apply version k at their step k - 1 (server/shard.h).
    log_->Append(kind == ApplyTask::Kind::kGradient && compressed != nullptr &&
                         check == nullptr
                     ? LoggedUpdate::Of(
                           version, *compressed,
                           optimizer_.LearningRate(version - 1) * bound.scale,
                           optimizer_.options().weight_decay)
                     : LoggedUpdate::Unreplayable(version));
  }
  auto completion = std::make_shared<PushCompletion>();
  completion->remaining.store(static_cast<int>(shards_.size()));
  const bool admm = kind == ApplyTask::Kind::kAdmm;
  completion->on_done = [this, worker_id, version, check, admm,
                         on_applied = std::move(on_applied)] {
    in_flight_.fetch_sub(1, std::memory_order_acq_rel);
    if (check != nullptr && !check->passed()) {
      CountRejected(RejectReason::kNonFiniteUpdate);
      on_applied(version,
                 absl::InvalidArgumentError(
                     "the update would make the model non-finite (or larger "
                     "than the server keeps); nothing was applied. Training "
                     "diverged: lower the learning rate"));
      return;
    }
    applied_count_.fetch_add(1, std::memory_order_relaxed);
    if (admm) CountAdmmChange(check->max() / options_.admm_slots);
    if (options_.observer != nullptr) {
      options_.observer->OnPushApplied(worker_id, version);
    }
    on_applied(version, absl::OkStatus());
  };
  for (auto& shard : shards_) {
    // Cannot fail: every queue holds at most in_flight_ tasks.
    ApplyTask task;
    task.kind = kind;
    task.data = values;
    task.compressed = compressed;
    task.scale = bound.scale;
    task.backup = backup;
    task.completion = completion;
    task.check = check;
    task.admm_slot = bound.admm_slot;
    const bool ok = shard->TryEnqueue(std::move(task));
    (void)ok;
  }
  return absl::OkStatus();
}

absl::StatusOr<StoreSnapshot> ParamStore::TakeSnapshot() {
  absl::Notification done;
  absl::StatusOr<StoreSnapshot> result;
  TakeSnapshotAsync([&](absl::StatusOr<StoreSnapshot> snapshot) {
    result = std::move(snapshot);
    done.Notify();
  });
  done.WaitForNotification();
  return result;
}

void ParamStore::TakeSnapshotAsync(
    std::function<void(absl::StatusOr<StoreSnapshot>)> done) {
  auto target = std::make_shared<SnapshotTarget>();
  target->weights.resize(range_.size());
  if (optimizer_.has_state()) target->state.resize(range_.size());
  absl::ReleasableMutexLock lock(&submit_mu_);
  if (shut_down_) {
    lock.Release();  // `done` may take its caller's locks
    done(absl::UnavailableError("store is shut down"));
    return;
  }
  // Every shard gets this task after exactly the `version` updates admitted
  // so far, in the same order: the copies form one consistent model.
  const uint64_t version = accepted_.load(std::memory_order_acquire);
  auto completion = std::make_shared<PushCompletion>();
  completion->remaining.store(static_cast<int>(shards_.size()));
  completion->on_done = [target, version, done = std::move(done)] {
    done(StoreSnapshot{version, std::move(target->weights),
                       std::move(target->state)});
  };
  for (auto& shard : shards_) {
    ApplyTask task;
    task.kind = ApplyTask::Kind::kSnapshot;
    task.snapshot = target;
    task.completion = completion;
    const bool ok = shard->TryEnqueue(std::move(task), /*control=*/true);
    (void)ok;  // control tasks are always admitted before shutdown
  }
}

absl::Status ParamStore::Restore(const StoreSnapshot& snapshot) {
  if (static_cast<int64_t>(snapshot.weights.size()) != range_.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "snapshot has ", snapshot.weights.size(), " weights, this server holds ",
        range_.size()));
  }
  if (optimizer_.has_state() &&
      static_cast<int64_t>(snapshot.state.size()) != range_.size()) {
    return absl::InvalidArgumentError(
        "snapshot has no momentum state but the optimizer needs it");
  }
  const float max_abs =
      std::max(MaxAbs(snapshot.weights.data(), snapshot.weights.size()),
               MaxAbs(snapshot.state.data(), snapshot.state.size()));
  if (!std::isfinite(max_abs)) {
    return absl::InvalidArgumentError(
        "snapshot holds non-finite values; refusing to serve it");
  }
  absl::MutexLock lock(&submit_mu_);
  if (accepted_.load() != 0) {
    return absl::FailedPreconditionError("restore only before any update");
  }
  for (auto& shard : shards_) {
    shard->Restore(snapshot.weights, snapshot.state, snapshot.version);
  }
  accepted_.store(snapshot.version, std::memory_order_release);
  prefix_base_ = snapshot.version;
  prefix_.assign(1, {0.0, 0.0});
  return absl::OkStatus();
}

void ParamStore::CountRejected(RejectReason reason) {
  rejected_[static_cast<int>(reason)].fetch_add(1, std::memory_order_relaxed);
  if (options_.observer != nullptr) options_.observer->OnPushRejected(reason);
}

void ParamStore::CountPull() { pulls_.fetch_add(1, std::memory_order_relaxed); }

void ParamStore::CountUpdatePull() {
  update_pulls_.fetch_add(1, std::memory_order_relaxed);
}

ParamStoreStats ParamStore::stats() const {
  ParamStoreStats s;
  s.pushes_applied = applied_count_.load(std::memory_order_relaxed);
  s.pushes_dropped_stale = dropped_stale_.load(std::memory_order_relaxed);
  s.pulls = pulls_.load(std::memory_order_relaxed);
  s.update_pulls = update_pulls_.load(std::memory_order_relaxed);
  for (size_t i = 0; i < rejected_.size(); ++i) {
    s.rejected[i] = rejected_[i].load(std::memory_order_relaxed);
  }
  s.updates_checked = updates_checked_.load(std::memory_order_relaxed);
  s.updates_clipped = updates_clipped_.load(std::memory_order_relaxed);
  s.largest_change = largest_change_.load(std::memory_order_relaxed);
  s.dc_backup_misses = dc_backup_misses_.load(std::memory_order_relaxed);
  s.dc_backup_bytes = backup_bytes_->load();
  {
    absl::MutexLock lock(&backup_mu_);
    s.dc_backups = static_cast<int64_t>(backups_.size());
  }
  s.staging_buffers = staging_.live();
  s.staging_bytes = staging_.charged_bytes();
  s.staging_bytes_max = staging_.max_bytes();
  return s;
}

void ParamStore::Shutdown() {
  std::vector<SyncWaiter> waiters;
  {
    absl::MutexLock lock(&submit_mu_);
    shut_down_ = true;
    waiters.swap(sync_waiters_);
  }
  // Synchronous pushes still waiting for their step will never complete.
  for (SyncWaiter& w : waiters) w.done(PushResult{false, 0, accepted()});
  for (auto& shard : shards_) shard->Close();
}

}  // namespace asgd
