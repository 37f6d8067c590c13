// FakeClock: a Clock for tests. Time starts at the Unix epoch and moves
// only through SleepFor() (which returns at once, having advanced the time),
// Advance(), and a tick that every Now() adds after reading (0 unless
// set_tick); Sleeps() is the total slept.
//
// Thread-safety: thread-safe.
#ifndef ASGD_WORKER_LOOP_FAKE_CLOCK_H_
#define ASGD_WORKER_LOOP_FAKE_CLOCK_H_

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "worker/loop/clock.h"

namespace asgd {

class FakeClock final : public Clock {
 public:
  absl::Time Now() override {
    absl::MutexLock lock(&mu_);
    const absl::Time now = now_;
    now_ += tick_;
    return now;
  }
  void SleepFor(absl::Duration d) override {
    absl::MutexLock lock(&mu_);
    now_ += d;
    slept_ += d;
  }
  void Advance(absl::Duration d) {
    absl::MutexLock lock(&mu_);
    now_ += d;
  }
  void set_tick(absl::Duration tick) {
    absl::MutexLock lock(&mu_);
    tick_ = tick;
  }
  absl::Duration Sleeps() {
    absl::MutexLock lock(&mu_);
    return slept_;
  }

 private:
  absl::Mutex mu_;
  absl::Time now_ ABSL_GUARDED_BY(mu_) = absl::UnixEpoch();
  absl::Duration slept_ ABSL_GUARDED_BY(mu_);
  absl::Duration tick_ ABSL_GUARDED_BY(mu_);
};

}  // namespace asgd

#endif  // ASGD_WORKER_LOOP_FAKE_CLOCK_H_
