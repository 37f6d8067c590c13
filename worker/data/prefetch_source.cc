#include "worker/data/prefetch_source.h"

#include <algorithm>
#include <utility>

namespace asgd {

PrefetchSource::PrefetchSource(std::unique_ptr<BatchSource> inner, int depth,
                               const BatchBuffer& prototype)
    : inner_(std::move(inner)), depth_(std::clamp(depth, 1, 16)) {
  for (int i = 0; i < depth_; ++i) free_.push_back(prototype);
  thread_ = std::thread([this] { Run(); });
}

PrefetchSource::~PrefetchSource() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  thread_.join();
}

void PrefetchSource::Run() {
  for (;;) {
    Drawn drawn{false, BatchBuffer(0, 0, 0), 0};
    {
      absl::MutexLock lock(&mu_);
      auto can_draw = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return stop_ || !free_.empty();
      };
      mu_.Await(absl::Condition(&can_draw));
      if (stop_) return;
      drawn.batch = std::move(free_.back());
      free_.pop_back();
    }
    drawn.more = inner_->Next(&drawn.batch);
    drawn.epochs = inner_->epochs();
    const bool last = !drawn.more.ok() || !*drawn.more;
    absl::MutexLock lock(&mu_);
    ready_.push_back(std::move(drawn));
    if (last) return;  // nothing more to draw: the loop gets this forever
  }
}

absl::StatusOr<bool> PrefetchSource::Next(BatchBuffer* batch) {
  absl::MutexLock lock(&mu_);
  auto has_one = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return !ready_.empty();
  };
  mu_.Await(absl::Condition(&has_one));
  Drawn& drawn = ready_.front();
  epochs_ = drawn.epochs;
  if (!drawn.more.ok() || !*drawn.more) return drawn.more;  // stays queued
  std::swap(*batch, drawn.batch);
  free_.push_back(std::move(drawn.batch));
  ready_.pop_front();
  return true;
}

}  // namespace asgd
