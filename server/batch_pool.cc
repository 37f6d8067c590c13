#include "server/batch_pool.h"

#include <cmath>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

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

absl::StatusOr<BatchGrant> BatchPool::Take(uint64_t worker_id,
                                           uint64_t num_frames,
                                           uint32_t batch_size, double epochs,
                                           uint32_t count) {
  const bool sizes_ok = num_frames >= 1 && num_frames <= kMaxFrames &&
                        batch_size >= 1 && batch_size <= kMaxBatchSize &&
                        batch_size <= num_frames;
  const bool epochs_ok =
      std::isfinite(epochs) && epochs > 0 && epochs <= kMaxEpochs;
  if (!sizes_ok || !epochs_ok || count < 1 || count > kMaxCount) {
    return absl::InvalidArgumentError(absl::StrCat(
        "bad pool request: num_frames=", num_frames, " batch_size=", batch_size,
        " epochs=", epochs, " count=", count, " (want 1 <= ",
        "batch_size <= num_frames <= 2^40, batch_size <= 2^24, 0 < epochs <= ",
        kMaxEpochs, ", 1 <= count <= ", kMaxCount, ")"));
  }
  const uint64_t per_epoch = num_frames / batch_size;
  // Both factors are bounded, so the product is an exact-enough double and
  // the conversion below is defined.
  const double batches = std::ceil(epochs * static_cast<double>(per_epoch));
  if (!(batches <= kMaxBatches)) {
    return absl::InvalidArgumentError(
        absl::StrCat("bad pool request: ", epochs, " epochs of ", per_epoch,
                     " batches is more than 2^48 batches"));
  }
  const absl::Time now = options_.clock ? options_.clock() : absl::Now();
  absl::MutexLock lock(&mu_);
  const Key key{num_frames, batch_size, epochs};
  auto it = datasets_.find(key);
  if (it == datasets_.end()) {
    if (static_cast<int>(datasets_.size()) >= options_.max_datasets) {
      auto idlest = datasets_.end();
      for (auto d = datasets_.begin(); d != datasets_.end(); ++d) {
        if (now - d->second.last_use < options_.idle_expiry) continue;
        if (idlest == datasets_.end() ||
            d->second.last_use < idlest->second.last_use) {
          idlest = d;
        }
      }
      if (idlest == datasets_.end()) {
        return absl::ResourceExhaustedError(absl::StrCat(
            "the minibatch pool already serves ", datasets_.size(),
            " datasets, each used within the last ",
            absl::FormatDuration(options_.idle_expiry),
            " (start every worker with the same corpus and flags)"));
      }
      datasets_.erase(idlest);
    }
    it = datasets_.emplace(key, Dataset{}).first;
    it->second.total = static_cast<uint64_t>(batches);
  }
  Dataset& d = it->second;
  d.last_use = now;
  BatchGrant grant;
  grant.batches_per_epoch = per_epoch;
  while (grant.batch_ids.size() < count && d.next < d.total) {
    grant.batch_ids.push_back(d.next++);
  }
  auto taken = d.taken.find(worker_id);
  if (taken != d.taken.end()) {
    taken->second += grant.batch_ids.size();
  } else if (d.taken.size() < kMaxWorkersTracked) {
    d.taken.emplace(worker_id, grant.batch_ids.size());
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

}  // namespace asgd
