#include "worker/peer/adpsgd.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"

namespace asgd {

AdpsgdAverager::AdpsgdAverager(PeerModel* model, PeerClient* peers,
                               const AdpsgdOptions& options,
                               PeerObserver* observer)
    : model_(model),
      peers_(peers),
      options_(options),
      observer_(observer),
      sent_(model->size()),
      theirs_(model->size()),
      failures_(peers->num_workers(), 0),
      retry_after_(peers->num_workers(), absl::InfinitePast()) {}

std::optional<AverageResult> AdpsgdAverager::Step(uint64_t step) {
  const int me = peers_->worker_index();
  const int peer = ExchangePartner(options_.topology, peers_->num_workers(),
                                   options_.topology_seed, step, me);
  if (peer < 0) return std::nullopt;
  if (absl::Now() < retry_after_[peer]) {
    ++stats_.skipped;
    if (observer_ != nullptr) observer_->OnAverage(AverageResult::kSkipped, 0);
    return AverageResult::kSkipped;
  }
  model_->Read(absl::MakeSpan(sent_));
  const absl::Status status =
      peers_->Average(peer, step, sent_, absl::MakeSpan(theirs_));
  if (!status.ok()) {
    ++stats_.failed;
    const int failures = ++failures_[peer];
    const absl::Duration backoff = std::min(
        options_.backoff_initial * (int64_t{1} << std::min(failures - 1, 20)),
        options_.backoff_max);
    retry_after_[peer] = absl::Now() + backoff;
    log_lines_.push_back(absl::StrFormat(
        "worker %d step %d: averaging with worker %d failed (%s); training "
        "on without it, next try in %s",
        me, step, peer, status.ToString(), absl::FormatDuration(backoff)));
    if (observer_ != nullptr) observer_->OnAverage(AverageResult::kFailed, 0);
    return AverageResult::kFailed;
  }
  model_->AverageAsInitiator(sent_, theirs_);
  if (failures_[peer] > 0) {
    log_lines_.push_back(absl::StrFormat(
        "worker %d step %d: averaging with worker %d works again", me, step,
        peer));
  }
  failures_[peer] = 0;
  ++stats_.ok;
  stats_.last_distance = L2Distance(sent_, theirs_);
  if (observer_ != nullptr) {
    observer_->OnAverage(AverageResult::kOk, stats_.last_distance);
  }
  return AverageResult::kOk;
}

std::vector<std::string> AdpsgdAverager::TakeLogLines() {
  std::vector<std::string> lines;
  lines.swap(log_lines_);
  return lines;
}

}  // namespace asgd
