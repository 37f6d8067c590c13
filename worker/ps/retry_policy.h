// RetryPolicy: the one retry path of a worker's calls to the pool (pulls,
// pushes, minibatch-pool fetches).
//
// A failed call of a transient kind (a server is down or restarting:
// UNAVAILABLE, DEADLINE_EXCEEDED, CANCELLED, and ABORTED for a push from
// versions a restarted server never reached; with `pool_full`, also
// RESOURCE_EXHAUSTED) is waited out with exponential backoff
// (initial_backoff doubling up to max_backoff, times a jitter in [0.5, 1])
// for up to max_retry_time since the first of the consecutive failures;
// then the error is final. Decisions rest on the status code alone, never
// on the message text. Refusals (common/refusal.h) are the caller's
// business: a refused push is not a failure to retry.
//
//   RetryPolicy retry(options, worker_index, observer, clock, log);
//   for (;;) {
//     absl::Status s = client->Pull(params, &versions);
//     if (s.ok()) { retry.Succeeded("the pool answers again"); break; }
//     ASGD_RETURN_IF_ERROR(retry.BackOff(s, "pull"));
//   }
//
// Thread-safety: not thread-safe; one per training thread.
#ifndef ASGD_WORKER_PS_RETRY_POLICY_H_
#define ASGD_WORKER_PS_RETRY_POLICY_H_

#include <cstdint>
#include <functional>
#include <ostream>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "worker/loop/clock.h"
#include "worker/loop/loop.h"

namespace asgd {

struct RetryOptions {
  absl::Duration initial_backoff = absl::Milliseconds(100);
  absl::Duration max_backoff = absl::Seconds(1);
  absl::Duration max_retry_time = absl::Minutes(10);
  // Seed of the jitter; 0: JitterSeed(worker_index).
  uint64_t jitter_seed = 0;
};

// A jitter seed that differs between workers (from the worker index, the
// process id and the clock) and between runs.
uint64_t JitterSeed(int worker_index);

class RetryPolicy {
 public:
  // `observer` (told of each retry), `log` may be null; `clock` must
  // outlive the policy.
  RetryPolicy(const RetryOptions& options, int worker_index,
              TrainerObserver* observer, Clock* clock, std::ostream* log);

  // After a failed call: OK, having waited the backoff, when `error` is
  // transient (or, with `pool_full`, RESOURCE_EXHAUSTED) and the retry
  // budget lasts; else `error` (past the budget with how long it failed).
  // `what` names the call in the log line.
  absl::Status BackOff(const absl::Status& error, absl::string_view what,
                       bool pool_full = false);
  // Runs `call` until it succeeds (then Succeeded(recovered)) or BackOff
  // gives up on its error (returned). `what` names the call in the log.
  absl::Status Retry(const std::function<absl::Status()>& call,
                     absl::string_view what, absl::string_view recovered);

  // After a call that succeeded: ends the run of failures, logging
  // "worker <i>: <recovered>" when there was one (and `recovered` is not
  // empty).
  void Succeeded(absl::string_view recovered = "");
  // Consecutive failures so far.
  int failures() const { return failures_; }
  absl::Duration max_retry_time() const { return options_.max_retry_time; }

 private:
  const RetryOptions options_;
  const int worker_index_;
  TrainerObserver* const observer_;
  Clock* const clock_;
  std::ostream* const log_;
  int failures_ = 0;
  absl::Time first_failure_;  // of the current run of failures
  uint64_t jitter_state_;
};

}  // namespace asgd

#endif  // ASGD_WORKER_PS_RETRY_POLICY_H_
