#include "server/param_store.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace asgd {

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
    case RejectReason::kCount: break;
  }
  return "unknown";
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
                          options.num_shards));
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
  if (options.queue_capacity < 1 || options.max_chunk_elements < 1) {
    return absl::InvalidArgumentError(
        "queue_capacity and max_chunk_elements must be at least 1");
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
    store->shards_.push_back(std::make_unique<Shard>(
        k, store->weights_.data() + local, local, s.size(),
        &store->optimizer_, options.queue_capacity));
  }
  return store;
}

ParamStore::ParamStore(const ParamStoreOptions& options, ModelLayout layout,
                       Optimizer optimizer)
    : options_(options),
      layout_(std::move(layout)),
      range_(layout_.ServerRange(options.server_index)),
      optimizer_(optimizer),
      weights_(range_.size()) {}

ParamStore::~ParamStore() { Shutdown(); }

uint64_t ParamStore::version() const {
  uint64_t v = std::numeric_limits<uint64_t>::max();
  for (const auto& shard : shards_) v = std::min(v, shard->applied());
  return shards_.empty() ? 0 : v;
}

void ParamStore::Read(int64_t begin, int64_t n, float* out) const {
  std::memcpy(out, weights_.data() + begin, n * sizeof(float));
}

std::vector<float> ParamStore::Snapshot() const {
  std::vector<float> copy(weights_.size());
  Read(0, copy.size(), copy.data());
  return copy;
}

absl::Status ParamStore::Submit(
    uint64_t base_version, int num_minibatches,
    std::shared_ptr<const std::vector<float>> gradient,
    std::function<void(const PushResult&)> done) {
  if (gradient == nullptr ||
      static_cast<int64_t>(gradient->size()) != range_.size()) {
    CountRejected(RejectReason::kBadSize);
    return absl::InvalidArgumentError(absl::StrCat(
        "gradient has ", gradient ? gradient->size() : 0,
        " values, this server holds ", range_.size()));
  }
  if (num_minibatches < 1) {
    CountRejected(RejectReason::kBadHeader);
    return absl::InvalidArgumentError(
        absl::StrCat("num_minibatches must be >= 1, got ", num_minibatches));
  }
  PushResult result;
  {
    absl::MutexLock lock(&submit_mu_);
    const uint64_t now = accepted_.load(std::memory_order_acquire);
    if (shut_down_) {
      return absl::UnavailableError("server is shutting down");
    }
    if (base_version > now) {
      CountRejected(RejectReason::kFutureVersion);
      return absl::InvalidArgumentError(absl::StrCat(
          "push computed from version ", base_version,
          " but this server is only at version ", now,
          " (a version from the future: wrong server or a restarted one)"));
    }
    result.staleness = now - base_version;
    if (options_.max_staleness > 0 &&
        result.staleness > options_.max_staleness) {
      result.applied = false;
      result.version = now;
      dropped_stale_.fetch_add(1, std::memory_order_relaxed);
    } else {
      if (in_flight_.load(std::memory_order_acquire) >=
          options_.queue_capacity) {
        CountRejected(RejectReason::kBusy);
        return absl::UnavailableError(
            "server busy: apply queues are full; retry or compute another "
            "minibatch");
      }
      in_flight_.fetch_add(1, std::memory_order_acq_rel);
      result.applied = true;
      result.version = accepted_.fetch_add(1, std::memory_order_acq_rel) + 1;
      auto completion = std::make_shared<PushCompletion>();
      completion->remaining.store(static_cast<int>(shards_.size()));
      completion->on_done = [this, result, done = std::move(done)] {
        applied_count_.fetch_add(1, std::memory_order_relaxed);
        in_flight_.fetch_sub(1, std::memory_order_acq_rel);
        done(result);
      };
      for (auto& shard : shards_) {
        // Cannot fail: every queue holds at most in_flight_ tasks.
        const bool ok =
            shard->TryEnqueue(ApplyTask{gradient, 1.0f, completion});
        (void)ok;
      }
      return absl::OkStatus();
    }
  }
  done(result);
  return absl::OkStatus();
}

void ParamStore::CountRejected(RejectReason reason) {
  rejected_[static_cast<int>(reason)].fetch_add(1, std::memory_order_relaxed);
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
  {
    absl::MutexLock lock(&submit_mu_);
    shut_down_ = true;
  }
  for (auto& shard : shards_) shard->Close();
}

}  // namespace asgd
