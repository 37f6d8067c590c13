#include "server/batch_pool.h"

#include <cmath>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace asgd {

absl::StatusOr<BatchGrant> BatchPool::Take(uint64_t worker_id,
                                           uint64_t num_frames,
                                           uint32_t batch_size, double epochs,
                                           uint32_t count) {
  if (num_frames == 0 || batch_size == 0 || !(epochs > 0) ||
      !std::isfinite(epochs) || count == 0 || count > 1024 ||
      batch_size > num_frames) {
    return absl::InvalidArgumentError(absl::StrCat(
        "bad pool request: num_frames=", num_frames, " batch_size=",
        batch_size, " epochs=", epochs, " count=", count,
        " (want frames >= batch_size > 0, epochs > 0, 1 <= count <= 1024)"));
  }
  absl::MutexLock lock(&mu_);
  const uint64_t per_epoch = num_frames / batch_size;
  if (!configured_) {
    configured_ = true;
    num_frames_ = num_frames;
    batch_size_ = batch_size;
    epochs_ = epochs;
    total_ = static_cast<uint64_t>(std::ceil(epochs * per_epoch));
  } else if (num_frames != num_frames_ || batch_size != batch_size_ ||
             epochs != epochs_) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the pool serves a dataset of ", num_frames_, " frames, batch ",
        batch_size_, ", ", epochs_, " epochs; this worker asked for ",
        num_frames, ", ", batch_size, ", ", epochs,
        " (start every worker with the same corpus and flags)"));
  }
  BatchGrant grant;
  grant.batches_per_epoch = per_epoch;
  while (grant.batch_ids.size() < count && next_ < total_) {
    grant.batch_ids.push_back(next_++);
  }
  taken_[worker_id] += grant.batch_ids.size();
  grant.exhausted = next_ >= total_;
  return grant;
}

uint64_t BatchPool::TakenBy(uint64_t worker_id) const {
  absl::MutexLock lock(&mu_);
  auto it = taken_.find(worker_id);
  return it == taken_.end() ? 0 : it->second;
}

}  // namespace asgd
