#include "worker/ps/part_runner.h"

namespace asgd {

PartRunner::PartRunner(int parts) : parts_(parts < 1 ? 1 : parts) {
  helpers_.reserve(parts_ - 1);
  for (int p = 1; p < parts_; ++p) {
    helpers_.emplace_back([this, p] { Helper(p); });
  }
}

PartRunner::~PartRunner() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  for (std::thread& t : helpers_) t.join();
}

void PartRunner::Run(absl::FunctionRef<void(int)> job) {
  if (parts_ == 1) {
    job(0);
    return;
  }
  {
    absl::MutexLock lock(&mu_);
    job_ = &job;
    running_ = parts_ - 1;
    ++generation_;
  }
  job(0);
  absl::MutexLock lock(&mu_);
  mu_.Await(absl::Condition(
      +[](int* running) { return *running == 0; }, &running_));
  job_ = nullptr;
}

void PartRunner::Helper(int part) {
  uint64_t seen = 0;
  for (;;) {
    const absl::FunctionRef<void(int)>* job;
    {
      absl::MutexLock lock(&mu_);
      auto ready = [this, &seen]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return stop_ || generation_ != seen;
      };
      mu_.Await(absl::Condition(&ready));
      if (stop_) return;
      seen = generation_;
      job = job_;
    }
    (*job)(part);
    absl::MutexLock lock(&mu_);
    --running_;
  }
}

void PartRunner::Split(int64_t n, int parts, int p, int64_t* begin,
                       int64_t* end) {
  const int64_t base = n / parts;
  const int64_t extra = n % parts;
  *begin = p * base + (p < extra ? p : extra);
  *end = *begin + base + (p < extra ? 1 : 0);
}

}  // namespace asgd
