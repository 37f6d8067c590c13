// ParamStore's admission of one update (param_store.h: Submit): the checks,
// then, under the submit lock, the version, the staleness and the step's
// scale and bound, and the shard queues.
#include <cmath>
#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/refusal.h"
#include "common/status_macros.h"
#include "server/param_store.h"

namespace asgd {

absl::Status ParamStore::CheckPushKind(PushRequest::Kind kind,
                                       int64_t admm_slot) const {
  const int slots = options_.admm_slots;
  if (kind == PushRequest::Kind::kAdmm) {
    if (slots == 0) {
      return absl::FailedPreconditionError(
          "an ADMM push to a server that keeps no ADMM slots: start the "
          "servers with --admm_slots=N (N: the number of ADMM workers)");
    }
    if (admm_slot < 0 || admm_slot >= slots) {
      return absl::InvalidArgumentError(
          absl::StrCat("ADMM slot ", admm_slot, " is outside [0, ", slots,
                       ") (--admm_slots of the server; the worker's slot is "
                       "its --worker_index)"));
    }
    return absl::OkStatus();
  }
  if (slots > 0 && kind != PushRequest::Kind::kAssign) {
    return absl::FailedPreconditionError(absl::StrCat(
        "this server keeps ADMM's consensus over ", slots,
        " worker slots (--admm_slots) and takes only ADMM and assign pushes; "
        "a ",
        kind == PushRequest::Kind::kAdd ? "consensus add" : "gradient",
        " push would move it off the slots' average"));
  }
  return absl::OkStatus();
}

absl::Status ParamStore::CheckPush(PushRequest* request) {
  if (absl::Status s = CheckPushKind(request->kind, request->admm_slot);
      !s.ok()) {
    CountRejected(RejectReason::kBadHeader);
    return s;
  }
  if (request->kind == PushRequest::Kind::kAdd && options_.sync_workers > 0) {
    CountRejected(RejectReason::kBadHeader);
    return absl::InvalidArgumentError(
        "an add push (consensus training) in a synchronous pool: this pool "
        "averages gradients (--sync_workers); start it without");
  }
  if (request->compressed != nullptr) {
    if (request->kind != PushRequest::Kind::kGradient) {
      CountRejected(RejectReason::kBadHeader);
      return absl::InvalidArgumentError(
          request->kind == PushRequest::Kind::kAssign
              ? "an assign push carries weights, not a compressed gradient"
              : "an add or ADMM push carries float32 or bfloat16 values, "
                "not a compressed gradient");
    }
    if (request->compressed->size() != range_.size()) {
      CountRejected(RejectReason::kBadSize);
      return absl::InvalidArgumentError(
          absl::StrCat("compressed update covers ", request->compressed->size(),
                       " values, this server holds ", range_.size()));
    }
    request->max_abs = request->compressed->max_abs;
    if (options_.sync_workers > 0) {
      // Synchronous steps sum float32 gradients: decode into staging memory.
      std::shared_ptr<std::vector<float>> decoded =
          AcquireStaging(range_.size() * int64_t{sizeof(float)});
      if (decoded == nullptr) {
        CountRejected(RejectReason::kPushMemory);
        return WithRefusal(
            absl::UnavailableError("server busy: the memory for pushes in "
                                   "flight is in use; retry"),
            Refusal::kPushMemory);
      }
      DecodeCompressedRange(request->compressed->chunks, decoded->data());
      request->values = std::move(decoded);
      request->compressed = nullptr;
    }
  }
  if (request->compressed == nullptr &&
      (request->values == nullptr ||
       static_cast<int64_t>(request->values->size()) != range_.size())) {
    CountRejected(RejectReason::kBadSize);
    return absl::InvalidArgumentError(absl::StrCat(
        "update has ", request->values ? request->values->size() : 0,
        " values, this server holds ", range_.size()));
  }
  if (request->num_minibatches < 1 ||
      request->num_minibatches > options_.max_push_minibatches) {
    CountRejected(RejectReason::kBadHeader);
    return absl::InvalidArgumentError(absl::StrCat(
        "num_minibatches must be in [1, ", options_.max_push_minibatches,
        "], got ", request->num_minibatches));
  }
  if (request->max_abs < 0 && request->values != nullptr) {
    request->max_abs = MaxAbs(request->values->data(), request->values->size());
  }
  if (!std::isfinite(request->max_abs)) {
    CountRejected(RejectReason::kNonFinite);
    return absl::InvalidArgumentError("update holds NaN or Inf values");
  }
  return absl::OkStatus();
}

absl::Status ParamStore::Submit(PushRequest request,
                                std::function<void(const PushResult&)> done) {
  ASGD_RETURN_IF_ERROR(CheckPush(&request));
  PushResult dropped_result;
  {
    absl::MutexLock lock(&submit_mu_);
    if (shut_down_) return absl::UnavailableError("server is shutting down");
    const uint64_t now = accepted_.load(std::memory_order_acquire);
    if (request.base_version > now) {
      CountRejected(RejectReason::kFutureVersion);
      return absl::AbortedError(absl::StrCat(
          "push computed from version ", request.base_version,
          " but this server is only at version ", now,
          " (a version from the future: wrong server or a restarted one); "
          "pull again"));
    }
    const uint64_t staleness = now - request.base_version;
    UpdateBound bound;
    bound.max_g = request.max_abs;
    if (request.kind == PushRequest::Kind::kAssign) {
      bound.assign = true;
      return EnqueueLocked(
          request.worker_id, ApplyTask::Kind::kAssign,
          std::move(request.values), nullptr, bound, nullptr,
          [done = std::move(done)](uint64_t v, absl::Status error) {
            done(PushResult{error.ok(), 0, v, std::move(error)});
          });
    }
    bool dropped = false;
    if (options_.sync_workers > 0) {
      ASGD_RETURN_IF_ERROR(SubmitSyncLocked(request, done, &dropped));
      if (!dropped) return absl::OkStatus();
    } else if (options_.max_staleness > 0 &&
               staleness > options_.max_staleness) {
      dropped = true;
    } else if (request.kind == PushRequest::Kind::kAdd ||
               request.kind == PushRequest::Kind::kAdmm) {
      return SubmitAddLocked(std::move(request), staleness, bound,
                             std::move(done));
    } else {
      return SubmitGradientLocked(std::move(request), staleness, bound,
                                  std::move(done));
    }
    dropped_stale_.fetch_add(1, std::memory_order_relaxed);
    if (options_.observer != nullptr) {
      options_.observer->OnPushRejected(RejectReason::kStale);
    }
    dropped_result = PushResult{false, staleness, now, absl::OkStatus()};
  }
  done(dropped_result);
  return absl::OkStatus();
}

absl::Status ParamStore::SubmitGradientLocked(
    PushRequest request, uint64_t staleness, UpdateBound bound,
    std::function<void(const PushResult&)> done) {
  std::shared_ptr<const std::vector<float>> backup;
  if (optimizer_.needs_backup()) {
    absl::MutexLock backup_lock(&backup_mu_);
    auto it = backups_.find(request.worker_id);
    if (it != backups_.end()) {
      backup = it->second.values;
      bound.max_backup = it->second.max_abs;
    }
  }
  if (optimizer_.needs_backup() && backup == nullptr) {
    dc_backup_misses_.fetch_add(1, std::memory_order_relaxed);
    if (options_.observer != nullptr) options_.observer->OnDcBackupMiss();
  }
  bound.scale = ClipToMaxChangeLocked(
      UpdateScale(request.num_minibatches, staleness), request.max_abs);
  const uint64_t worker_id = request.worker_id;
  ASGD_RETURN_IF_ERROR(EnqueueLocked(
      worker_id, ApplyTask::Kind::kGradient, std::move(request.values),
      std::move(request.compressed), bound, std::move(backup),
      [staleness, done = std::move(done)](uint64_t v, absl::Status error) {
        done(PushResult{error.ok(), staleness, v, std::move(error)});
      }));
  if (options_.observer != nullptr) {
    options_.observer->OnPushAccepted(worker_id, staleness);
  }
  return absl::OkStatus();
}

absl::Status ParamStore::SubmitAddLocked(
    PushRequest request, uint64_t staleness, UpdateBound bound,
    std::function<void(const PushResult&)> done) {
  // No learning rate. An add's values move the weights as they are; an
  // ADMM step is u minus the slot, which only the shards hold: they find
  // its scale (ApplyTask::Kind::kAdmm).
  const bool admm = request.kind == PushRequest::Kind::kAdmm;
  if (admm) {
    bound.admm_slot = request.admm_slot;
  } else {
    bound.scale = ClipChangeLocked(1.0f, bound.max_g);
  }
  const uint64_t worker_id = request.worker_id;
  ASGD_RETURN_IF_ERROR(EnqueueLocked(
      worker_id, admm ? ApplyTask::Kind::kAdmm : ApplyTask::Kind::kAdd,
      std::move(request.values), nullptr, bound, nullptr,
      [staleness, done = std::move(done)](uint64_t v, absl::Status error) {
        done(PushResult{error.ok(), staleness, v, std::move(error)});
      }));
  if (options_.observer != nullptr) {
    options_.observer->OnPushAccepted(worker_id, staleness);
  }
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
  // The float sum must not overflow on the way to the average.
  if (!(sync_sum_bound_ + request.max_abs <=
        std::numeric_limits<float>::max())) {
    CountRejected(RejectReason::kNonFiniteUpdate);
    return absl::InvalidArgumentError(
        absl::StrCat("gradient values reach ", request.max_abs,
                     ": their sum over this synchronous step would overflow"));
  }
  sync_sum_bound_ += request.max_abs;
  sync_max_abs_ = std::max<double>(sync_max_abs_, request.max_abs);
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
  UpdateBound bound;
  bound.max_g = sync_max_abs_;  // an average is at most its largest term
  bound.scale = ClipToMaxChangeLocked(bound.scale, bound.max_g);
  sync_max_abs_ = 0;
  sync_sum_bound_ = 0;
  auto waiters = std::make_shared<std::vector<SyncWaiter>>(std::move(sync_waiters_));
  sync_waiters_.clear();
  absl::Status s = EnqueueLocked(
      request.worker_id, ApplyTask::Kind::kGradient, std::move(average),
      nullptr, bound, nullptr, [waiters](uint64_t v, absl::Status error) {
        for (SyncWaiter& w : *waiters)
          w.done(PushResult{error.ok(), 0, v, error});
      });
  if (!s.ok()) {
    // Busy (or refused): nobody's gradient was applied; every waiter
    // re-pulls and retries.
    const uint64_t now = accepted_.load(std::memory_order_acquire);
    for (SyncWaiter& w : *waiters) {
      w.done(PushResult{false, 0, now, absl::OkStatus()});
    }
    return absl::OkStatus();
  }
  if (options_.observer != nullptr) {
    options_.observer->OnPushAccepted(request.worker_id, 0);
  }
  return absl::OkStatus();
}

}  // namespace asgd
