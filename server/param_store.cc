#include "server/param_store.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
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
  if (options.queue_capacity < 1 || options.max_chunk_elements < 1 ||
      options.sync_workers < 0) {
    return absl::InvalidArgumentError(
        "queue_capacity and max_chunk_elements must be at least 1, "
        "sync_workers at least 0");
  }
  ASGD_ASSIGN_OR_RETURN(Optimizer optimizer,
                        Optimizer::Create(options.optimizer));
  auto store = std::unique_ptr<ParamStore>(
      new ParamStore(options, std::move(layout), optimizer));
  const FlatRange r = store->range_;
  std::copy(initial_model.begin() + r.begin, initial_model.begin() + r.end,
            store->weights_.begin());
  for (int k = 0; k < options.num_shards; ++k) {
    const FlatRange s = store->layout_.ShardRange(options.server_index, k);
    const int64_t local = s.begin - r.begin;
    Shard::AppliedCallback on_applied;
    if (StoreObserver* observer = options.observer; observer != nullptr) {
      on_applied = [observer](int shard, double seconds) {
        observer->OnShardApplied(shard, seconds);
      };
    }
    store->shards_.push_back(std::make_unique<Shard>(
        k, store->weights_.data() + local, local, s.size(),
        &store->optimizer_, options.queue_capacity, std::move(on_applied)));
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
      staging_(range_.size(), StagingBuffersKept(range_.size())) {}

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

std::vector<float> ParamStore::Snapshot() const {
  std::vector<float> copy(weights_.size());
  Read(0, copy.size(), copy.data());
  return copy;
}

std::shared_ptr<const std::vector<float>> ParamStore::SnapshotForPull(
    uint64_t worker_id) {
  if (!optimizer_.needs_backup()) return nullptr;
  auto snapshot = std::make_shared<const std::vector<float>>(Snapshot());
  absl::MutexLock lock(&backup_mu_);
  // Bounded: workers that come and go must not grow this without limit.
  if (backups_.size() >= 4096 && !backups_.contains(worker_id)) backups_.clear();
  backups_[worker_id] = snapshot;
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

absl::Status ParamStore::EnqueueLocked(
    uint64_t worker_id, ApplyTask::Kind kind,
    std::shared_ptr<const std::vector<float>> values, float scale,
    std::shared_ptr<const std::vector<float>> backup,
    std::function<void(uint64_t version)> on_applied) {
  if (in_flight_.load(std::memory_order_acquire) >= options_.queue_capacity) {
    CountRejected(RejectReason::kBusy);
    return absl::UnavailableError(
        "server busy: apply queues are full; retry or compute another "
        "minibatch");
  }
  in_flight_.fetch_add(1, std::memory_order_acq_rel);
  const uint64_t version = accepted_.fetch_add(1, std::memory_order_acq_rel) + 1;
  auto completion = std::make_shared<PushCompletion>();
  completion->remaining.store(static_cast<int>(shards_.size()));
  completion->on_done = [this, worker_id, version,
                          on_applied = std::move(on_applied)] {
    applied_count_.fetch_add(1, std::memory_order_relaxed);
    in_flight_.fetch_sub(1, std::memory_order_acq_rel);
    if (options_.observer != nullptr) {
      options_.observer->OnPushApplied(worker_id, version);
    }
    on_applied(version);
  };
  for (auto& shard : shards_) {
    // Cannot fail: every queue holds at most in_flight_ tasks.
    const bool ok = shard->TryEnqueue(ApplyTask{kind, values, scale, backup, nullptr, completion});
    (void)ok;
  }
  return absl::OkStatus();
}

absl::Status ParamStore::Submit(PushRequest request,
                                std::function<void(const PushResult&)> done) {
  if (request.values == nullptr ||
      static_cast<int64_t>(request.values->size()) != range_.size()) {
    CountRejected(RejectReason::kBadSize);
    return absl::InvalidArgumentError(absl::StrCat(
        "update has ", request.values ? request.values->size() : 0,
        " values, this server holds ", range_.size()));
  }
  if (request.num_minibatches < 1) {
    CountRejected(RejectReason::kBadHeader);
    return absl::InvalidArgumentError(absl::StrCat(
        "num_minibatches must be >= 1, got ", request.num_minibatches));
  }
  PushResult dropped_result;
  {
    absl::MutexLock lock(&submit_mu_);
    if (shut_down_) return absl::UnavailableError("server is shutting down");
    const uint64_t now = accepted_.load(std::memory_order_acquire);
    if (request.base_version > now) {
      CountRejected(RejectReason::kFutureVersion);
      return absl::InvalidArgumentError(absl::StrCat(
          "push computed from version ", request.base_version,
          " but this server is only at version ", now,
          " (a version from the future: wrong server or a restarted one)"));
    }
    const uint64_t staleness = now - request.base_version;
    if (request.assign) {
      return EnqueueLocked(request.worker_id, ApplyTask::Kind::kAssign,
                           std::move(request.values),
                           1.0f, nullptr, [done = std::move(done)](uint64_t v) {
                             done(PushResult{true, 0, v});
                           });
    }
    bool dropped = false;
    if (options_.sync_workers > 0) {
      ASGD_RETURN_IF_ERROR(SubmitSyncLocked(request, done, &dropped));
      if (!dropped) return absl::OkStatus();
    } else if (options_.max_staleness > 0 &&
               staleness > options_.max_staleness) {
      dropped = true;
    } else {
      std::shared_ptr<const std::vector<float>> backup;
      if (optimizer_.needs_backup()) {
        absl::MutexLock backup_lock(&backup_mu_);
        auto it = backups_.find(request.worker_id);
        if (it != backups_.end()) backup = it->second;
      }
      if (options_.observer != nullptr) {
        options_.observer->OnPushAccepted(request.worker_id, staleness);
      }
      return EnqueueLocked(
          request.worker_id, ApplyTask::Kind::kGradient,
          std::move(request.values),
          UpdateScale(request.num_minibatches, staleness), std::move(backup),
          [staleness, done = std::move(done)](uint64_t v) {
            done(PushResult{true, staleness, v});
          });
    }
    dropped_stale_.fetch_add(1, std::memory_order_relaxed);
    if (options_.observer != nullptr) {
      options_.observer->OnPushRejected(RejectReason::kStale);
    }
    dropped_result = PushResult{false, staleness, now};
  }
  done(dropped_result);
  return absl::OkStatus();
}

absl::Status ParamStore::SubmitSyncLocked(
    PushRequest& request, std::function<void(const PushResult&)>& done,
    bool* dropped) {
  if (request.base_version != accepted_.load(std::memory_order_acquire)) {
    *dropped = true;  // computed from an older step
    return absl::OkStatus();
  }
  for (const SyncWaiter& w : sync_waiters_) {
    if (w.worker_id == request.worker_id) {
      CountRejected(RejectReason::kBadHeader);
      return absl::InvalidArgumentError(absl::StrCat(
          "worker ", request.worker_id, " already pushed for version ",
          request.base_version, " (synchronous mode takes one push per worker)"));
    }
  }
  const std::vector<float>& g = *request.values;
  if (sync_sum_.empty()) {
    sync_sum_ = g;
  } else {
    for (size_t i = 0; i < g.size(); ++i) sync_sum_[i] += g[i];
  }
  sync_waiters_.push_back({request.worker_id, std::move(done)});
  if (static_cast<int>(sync_waiters_.size()) < options_.sync_workers) {
    return absl::OkStatus();
  }
  auto average = std::make_shared<std::vector<float>>(std::move(sync_sum_));
  sync_sum_.clear();
  const float inv = 1.0f / options_.sync_workers;
  for (float& x : *average) x *= inv;
  auto waiters = std::make_shared<std::vector<SyncWaiter>>(std::move(sync_waiters_));
  sync_waiters_.clear();
  if (options_.observer != nullptr) {
    options_.observer->OnPushAccepted(request.worker_id, 0);
  }
  absl::Status s = EnqueueLocked(
      request.worker_id, ApplyTask::Kind::kGradient, std::move(average), 1.0f,
      nullptr,
      [waiters](uint64_t v) {
        for (SyncWaiter& w : *waiters) w.done(PushResult{true, 0, v});
      });
  if (!s.ok()) {
    // Busy: nobody's gradient was applied; every waiter re-pulls and retries.
    const uint64_t now = accepted_.load(std::memory_order_acquire);
    for (SyncWaiter& w : *waiters) w.done(PushResult{false, 0, now});
  }
  return absl::OkStatus();
}

absl::StatusOr<StoreSnapshot> ParamStore::TakeSnapshot() {
  auto target = std::make_shared<SnapshotTarget>();
  target->weights.resize(range_.size());
  if (optimizer_.has_state()) target->state.resize(range_.size());
  auto done = std::make_shared<absl::Notification>();
  uint64_t version;
  {
    absl::MutexLock lock(&submit_mu_);
    if (shut_down_) return absl::UnavailableError("store is shut down");
    // Every shard gets this task after exactly the `version` updates admitted
    // so far, in the same order: the copies form one consistent model.
    version = accepted_.load(std::memory_order_acquire);
    auto completion = std::make_shared<PushCompletion>();
    completion->remaining.store(static_cast<int>(shards_.size()));
    completion->on_done = [done] { done->Notify(); };
    for (auto& shard : shards_) {
      ApplyTask task;
      task.kind = ApplyTask::Kind::kSnapshot;
      task.snapshot = target;
      task.completion = completion;
      const bool ok = shard->TryEnqueue(std::move(task), /*control=*/true);
      (void)ok;  // control tasks are always admitted before shutdown
    }
  }
  done->WaitForNotification();
  return StoreSnapshot{version, std::move(target->weights),
                       std::move(target->state)};
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
  absl::MutexLock lock(&submit_mu_);
  if (accepted_.load() != 0) {
    return absl::FailedPreconditionError("restore only before any update");
  }
  for (auto& shard : shards_) {
    shard->Restore(snapshot.weights, snapshot.state, snapshot.version);
  }
  accepted_.store(snapshot.version, std::memory_order_release);
  return absl::OkStatus();
}

void ParamStore::CountRejected(RejectReason reason) {
  rejected_[static_cast<int>(reason)].fetch_add(1, std::memory_order_relaxed);
  if (options_.observer != nullptr) options_.observer->OnPushRejected(reason);
}

void ParamStore::CountPull() { pulls_.fetch_add(1, std::memory_order_relaxed); }

ParamStoreStats ParamStore::stats() const {
  ParamStoreStats s;
  s.pushes_applied = applied_count_.load(std::memory_order_relaxed);
  s.pushes_dropped_stale = dropped_stale_.load(std::memory_order_relaxed);
  s.pulls = pulls_.load(std::memory_order_relaxed);
  for (size_t i = 0; i < rejected_.size(); ++i) {
    s.rejected[i] = rejected_[i].load(std::memory_order_relaxed);
  }
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
