// Clock: the training loops' only source of time, so that tests can drive
// time (back-off waits, slowdown idling, evaluation cadence) without
// sleeping. RealClock() is the wall clock; FakeClock (fake_clock.h) moves
// only when slept on or advanced.
//
// Thread-safety: implementations are thread-safe.
#ifndef ASGD_WORKER_LOOP_CLOCK_H_
#define ASGD_WORKER_LOOP_CLOCK_H_

#include "absl/time/time.h"

namespace asgd {

class Clock {
 public:
  virtual ~Clock() = default;
  virtual absl::Time Now() = 0;
  virtual void SleepFor(absl::Duration d) = 0;
};

// The wall clock (absl::Now, absl::SleepFor). Stateless; lives for the
// process.
Clock* RealClock();

}  // namespace asgd

#endif  // ASGD_WORKER_LOOP_CLOCK_H_
