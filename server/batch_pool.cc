#include "server/batch_pool.h"

#include <cmath>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/pool_run_id.h"

namespace asgd {
namespace {

constexpr uint64_t kMaxFrames = uint64_t{1} << 40;
constexpr uint32_t kMaxBatchSize = uint32_t{1} << 24;
constexpr double kMaxEpochs = 1e6;
constexpr double kMaxBatches = 281474976710656.0;  // 2^48
constexpr uint32_t kMaxCount = 1024;
constexpr size_t kMaxWorkersTracked = 1024;

}  // namespace

BatchPool::BatchPool(BatchPoolOptions options) : options_(std::move(options)) {}

bool BatchPool::ForgetIdlest(absl::Time now, const std::string* client) {
  auto idlest = datasets_.end();
  for (auto d = datasets_.begin(); d != datasets_.end(); ++d) {
    if (client != nullptr && d->second.client != *client) continue;
    if (now - d->second.last_use < options_.idle_expiry) continue;
    if (idlest == datasets_.end() ||
        d->second.last_use < idlest->second.last_use) {
      idlest = d;
    }
  }
  if (idlest == datasets_.end()) return false;
  datasets_.erase(idlest);
  return true;
}

absl::StatusOr<BatchGrant> BatchPool::Take(const BatchRequest& r) {
  if (absl::Status s = ValidatePoolRunId(r.run_id); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("bad pool request: ", s.message()));
  }
  const bool sizes_ok = r.num_frames >= 1 && r.num_frames <= kMaxFrames &&
                        r.batch_size >= 1 && r.batch_size <= kMaxBatchSize &&
                        r.batch_size <= r.num_frames;
  const bool epochs_ok =
      std::isfinite(r.epochs) && r.epochs > 0 && r.epochs <= kMaxEpochs;
  if (!sizes_ok || !epochs_ok || r.count < 1 || r.count > kMaxCount) {
    return absl::InvalidArgumentError(absl::StrCat(
        "bad pool request: num_frames=", r.num_frames,
        " batch_size=", r.batch_size, " epochs=", r.epochs, " count=", r.count,
        " (want 1 <= batch_size <= num_frames <= 2^40, batch_size <= 2^24, "
        "0 < epochs <= ",
        kMaxEpochs, ", 1 <= count <= ", kMaxCount, ")"));
  }
  const uint64_t per_epoch = r.num_frames / r.batch_size;
  // Both factors are bounded, so the product is an exact-enough double and
  // the conversion below is defined.
  const double batches = std::ceil(r.epochs * static_cast<double>(per_epoch));
  if (!(batches <= kMaxBatches)) {
    return absl::InvalidArgumentError(
        absl::StrCat("bad pool request: ", r.epochs, " epochs of ", per_epoch,
                     " batches is more than 2^48 batches"));
  }
  const absl::Time now = options_.clock ? options_.clock() : absl::Now();
  absl::MutexLock lock(&mu_);
  const Key key{r.run_id, r.num_frames, r.batch_size, r.epochs};
  auto it = datasets_.find(key);
  if (it == datasets_.end()) {
    int mine = 0;
    for (const auto& [k, d] : datasets_) mine += d.client == r.client;
    const std::string expiry = absl::FormatDuration(options_.idle_expiry);
    if (mine >= options_.max_datasets_per_client) {
      if (!ForgetIdlest(now, &r.client)) {
        return absl::ResourceExhaustedError(absl::StrCat(
            "the minibatch pool already serves ", mine,
            " datasets for this address (", r.client, "), the most it keeps ",
            "per address, each used within the last ", expiry,
            " (the workers of one run share one dataset: give them the same "
            "run id, corpus and flags)"));
      }
    } else if (static_cast<int>(datasets_.size()) >= options_.max_datasets &&
               !ForgetIdlest(now, nullptr)) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "the minibatch pool already serves ", datasets_.size(),
          " datasets, each used within the last ", expiry,
          "; one is forgotten after ", expiry, " without use"));
    }
    it = datasets_.emplace(key, Dataset{}).first;
    it->second.client = r.client;
    it->second.total = static_cast<uint64_t>(batches);
  }
  Dataset& d = it->second;
  d.last_use = now;
  BatchGrant grant;
  grant.batches_per_epoch = per_epoch;
  while (grant.batch_ids.size() < r.count && d.next < d.total) {
    grant.batch_ids.push_back(d.next++);
  }
  auto taken = d.taken.find(r.worker_id);
  if (taken != d.taken.end()) {
    taken->second += grant.batch_ids.size();
  } else if (d.taken.size() < kMaxWorkersTracked) {
    d.taken.emplace(r.worker_id, grant.batch_ids.size());
  }
  grant.exhausted = d.next >= d.total;
  return grant;
}

uint64_t BatchPool::TakenBy(uint64_t worker_id) const {
  absl::MutexLock lock(&mu_);
  uint64_t sum = 0;
  for (const auto& [key, d] : datasets_) {
    auto it = d.taken.find(worker_id);
    if (it != d.taken.end()) sum += it->second;
  }
  return sum;
}

int BatchPool::datasets() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int>(datasets_.size());
}

int BatchPool::datasets_of(const std::string& client) const {
  absl::MutexLock lock(&mu_);
  int n = 0;
  for (const auto& [key, d] : datasets_) n += d.client == client;
  return n;
}

}  // namespace asgd
