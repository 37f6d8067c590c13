#include "worker/ps/retry_policy.h"

#include <unistd.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace asgd {
namespace {

// Errors a restarting or briefly unreachable pool produces, by code alone.
// ABORTED is a push computed from versions a restored server never reached:
// pull again.
bool Transient(const absl::Status& s) {
  switch (s.code()) {
    case absl::StatusCode::kUnavailable:
    case absl::StatusCode::kDeadlineExceeded:
    case absl::StatusCode::kAborted:
    case absl::StatusCode::kCancelled:
      return true;
    default:
      return false;
  }
}

uint64_t SplitMix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

}  // namespace

uint64_t JitterSeed(int worker_index) {
  return SplitMix64(SplitMix64(static_cast<uint64_t>(worker_index)) ^
                    SplitMix64(static_cast<uint64_t>(getpid())) ^
                    static_cast<uint64_t>(absl::ToUnixNanos(absl::Now())));
}

RetryPolicy::RetryPolicy(const RetryOptions& options, int worker_index,
                         TrainerObserver* observer, Clock* clock,
                         std::ostream* log)
    : options_(options),
      worker_index_(worker_index),
      observer_(observer),
      clock_(clock),
      log_(log),
      jitter_state_(options.jitter_seed != 0 ? options.jitter_seed
                                             : JitterSeed(worker_index)) {}

absl::Status RetryPolicy::BackOff(const absl::Status& error,
                                  absl::string_view what, bool pool_full) {
  const bool retry =
      Transient(error) ||
      (pool_full && error.code() == absl::StatusCode::kResourceExhausted);
  if (!retry) return error;
  const absl::Time now = clock_->Now();
  if (failures_ == 0) first_failure_ = now;
  if (now - first_failure_ > options_.max_retry_time) {
    return absl::Status(error.code(),
                        absl::StrCat(error.message(), " (still failing after ",
                                     absl::FormatDuration(now - first_failure_),
                                     " of retries)"));
  }
  absl::Duration wait = options_.initial_backoff;
  for (int i = 0; i < failures_ && wait < options_.max_backoff; ++i) wait *= 2;
  wait = std::min(wait, options_.max_backoff);
  // Jitter in [0.5, 1], from a per-worker seed: workers that lost the same
  // server do not return in lockstep, and none waits past max_backoff.
  jitter_state_ = jitter_state_ * 6364136223846793005ull + 1442695040888963407ull;
  wait *= 0.5 + 0.5 * static_cast<double>(SplitMix64(jitter_state_) >> 11) *
                    0x1.0p-53;
  ++failures_;
  if (observer_ != nullptr) observer_->OnRpcRetry();
  if (log_ != nullptr) {
    *log_ << "worker " << worker_index_ << ": " << what << " failed ("
          << error << "); retry " << failures_ << " in "
          << absl::FormatDuration(wait) << std::endl;
  }
  clock_->SleepFor(wait);
  return absl::OkStatus();
}

absl::Status RetryPolicy::Retry(const std::function<absl::Status()>& call,
                                absl::string_view what,
                                absl::string_view recovered) {
  for (;;) {
    const absl::Status s = call();
    if (s.ok()) {
      Succeeded(recovered);
      return s;
    }
    ASGD_RETURN_IF_ERROR(BackOff(s, what));
  }
}

void RetryPolicy::Succeeded(absl::string_view recovered) {
  if (failures_ > 0 && log_ != nullptr && !recovered.empty()) {
    *log_ << "worker " << worker_index_ << ": " << recovered << std::endl;
  }
  failures_ = 0;
}

}  // namespace asgd
