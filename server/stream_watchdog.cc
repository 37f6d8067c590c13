#include "server/stream_watchdog.h"

#include <algorithm>
#include <limits>
#include <utility>
#include <vector>

#include "absl/time/clock.h"

namespace asgd {

StreamWatchdog::StreamWatchdog(absl::Duration timeout, Clock clock,
                               bool start_thread)
    : timeout_(timeout), clock_(clock ? std::move(clock) : Clock(absl::Now)) {
  if (start_thread) thread_ = std::thread([this] { Run(); });
}

StreamWatchdog::~StreamWatchdog() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

int64_t StreamWatchdog::NowNs() const { return absl::ToUnixNanos(clock_()); }

StreamWatchdog::Handle StreamWatchdog::Watch(std::function<void()> on_expire) {
  auto entry = std::make_shared<Entry>();
  entry->last_progress_ns.store(NowNs(), std::memory_order_relaxed);
  entry->on_expire = std::move(on_expire);
  absl::MutexLock lock(&mu_);
  entries_.emplace(entry.get(), entry);
  return entry;
}

void StreamWatchdog::Touch(const Handle& handle) const {
  handle->last_progress_ns.store(NowNs(), std::memory_order_relaxed);
}

void StreamWatchdog::Unwatch(const Handle& handle) {
  absl::MutexLock lock(&mu_);
  entries_.erase(handle.get());
}

int StreamWatchdog::Poll() {
  return ExpireUpTo(NowNs() - absl::ToInt64Nanoseconds(timeout_));
}

int StreamWatchdog::ExpireAll() {
  return ExpireUpTo(std::numeric_limits<int64_t>::max());
}

int StreamWatchdog::ExpireUpTo(int64_t deadline) {
  std::vector<Handle> expired;
  {
    absl::MutexLock lock(&mu_);
    for (auto it = entries_.begin(); it != entries_.end();) {
      if (it->first->last_progress_ns.load(std::memory_order_relaxed) <=
          deadline) {
        expired.push_back(std::move(it->second));
        entries_.erase(it++);
      } else {
        ++it;
      }
    }
  }
  for (const Handle& h : expired) h->on_expire();
  return static_cast<int>(expired.size());
}

int StreamWatchdog::watched() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int>(entries_.size());
}

void StreamWatchdog::Run() {
  const absl::Duration interval =
      std::clamp(timeout_ / 8, absl::Milliseconds(10), absl::Seconds(1));
  auto stopping = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stop_; };
  for (;;) {
    {
      absl::MutexLock lock(&mu_);
      if (mu_.AwaitWithTimeout(absl::Condition(&stopping), interval)) return;
    }
    Poll();
  }
}

}  // namespace asgd
