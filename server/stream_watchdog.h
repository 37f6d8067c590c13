// StreamWatchdog: ends streams that make no progress.
//
// A stream registers with Watch() and a callback; every message it receives
// counts as progress (Touch(), lock-free). A stream that made no progress for
// `timeout` is expired: it is no longer watched, and its callback runs once,
// on the watchdog's own thread (or in the caller of Poll()), outside the
// watchdog's lock. Unwatch() when the stream ends or no longer waits for its
// client (a committed push waiting for its apply); its callback then never
// runs, unless Poll() had already taken it (callers check their own state).
//
//   StreamWatchdog watchdog(absl::Seconds(20));  // starts its thread
//   StreamWatchdog::Handle h = watchdog.Watch([state] { state->Expire(); });
//   watchdog.Touch(h);    // on each message
//   watchdog.Unwatch(h);  // at the end
//
// The thread checks every timeout/8 (between 10 ms and 1 s), so a stream is
// expired at most that long after its timeout. Time comes from `clock`
// (absl::Now by default); tests pass their own clock and no thread, and call
// Poll().
//
// Thread-safety: thread-safe. The destructor stops the thread; callbacks of
// streams still watched then never run.
#ifndef ASGD_SERVER_STREAM_WATCHDOG_H_
#define ASGD_SERVER_STREAM_WATCHDOG_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace asgd {

class StreamWatchdog {
 public:
  using Clock = std::function<absl::Time()>;

  struct Entry {
    std::atomic<int64_t> last_progress_ns{0};
    std::function<void()> on_expire;
  };
  using Handle = std::shared_ptr<Entry>;

  // `clock` null: absl::Now. `start_thread` false: nothing expires until
  // Poll() is called.
  explicit StreamWatchdog(absl::Duration timeout, Clock clock = nullptr,
                          bool start_thread = true);
  ~StreamWatchdog();

  StreamWatchdog(const StreamWatchdog&) = delete;
  StreamWatchdog& operator=(const StreamWatchdog&) = delete;

  Handle Watch(std::function<void()> on_expire);
  void Touch(const Handle& handle) const;
  void Unwatch(const Handle& handle);

  // Expires every stream idle for the timeout now; returns how many.
  int Poll();
  // Expires every watched stream now, idle or not (a server shutting down);
  // returns how many.
  int ExpireAll();

  int watched() const;
  absl::Duration timeout() const { return timeout_; }

 private:
  int64_t NowNs() const;
  void Run();
  // Expires the streams whose last progress is at or before `deadline_ns`.
  int ExpireUpTo(int64_t deadline_ns);

  const absl::Duration timeout_;
  const Clock clock_;
  mutable absl::Mutex mu_;
  absl::flat_hash_map<Entry*, Handle> entries_ ABSL_GUARDED_BY(mu_);
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace asgd

#endif  // ASGD_SERVER_STREAM_WATCHDOG_H_
