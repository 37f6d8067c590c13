// ManualClock: the time of a test's StreamWatchdogs (GrpcServiceOptions::
// clock), moved only by Advance(). A test advances it past a timeout and
// calls the watchdog's Poll() instead of waiting on real time.
//
//   ManualClock clock;
//   GrpcServiceOptions service;
//   service.clock = clock.AsFunction();  // watchdogs without threads
//   ...
//   clock.Advance(service.push_progress_timeout);
//   server->service()->watchdog()->Poll();
//
// Thread-safety: thread-safe; it must outlive the watchdogs that read it.
#ifndef ASGD_SERVER_MANUAL_CLOCK_H_
#define ASGD_SERVER_MANUAL_CLOCK_H_

#include <functional>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace asgd {

class ManualClock {
 public:
  absl::Time Now() const {
    absl::MutexLock lock(&mu_);
    return now_;
  }
  void Advance(absl::Duration d) {
    absl::MutexLock lock(&mu_);
    now_ += d;
  }
  std::function<absl::Time()> AsFunction() {
    return [this] { return Now(); };
  }

 private:
  mutable absl::Mutex mu_;
  absl::Time now_ ABSL_GUARDED_BY(mu_) = absl::UnixEpoch() + absl::Hours(1);
};

}  // namespace asgd

#endif  // ASGD_SERVER_MANUAL_CLOCK_H_
