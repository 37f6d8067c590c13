#include "server/staging_pool.h"

#include <utility>

namespace asgd {

StagingPool::StagingPool(int64_t elements, int max_idle, int64_t max_buffers)
    : elements_(elements),
      state_(std::make_shared<State>(max_idle, max_buffers)) {}

std::shared_ptr<std::vector<float>> StagingPool::Acquire() {
  std::unique_ptr<std::vector<float>> buffer;
  {
    absl::MutexLock lock(&state_->mu);
    if (!state_->idle.empty()) {
      buffer = std::move(state_->idle.back());
      state_->idle.pop_back();
    } else if (state_->live >= state_->max_buffers) {
      return nullptr;
    } else {
      ++state_->allocations;
      ++state_->live;  // counted before the allocation, outside the lock
    }
  }
  if (buffer == nullptr) {
    buffer = std::make_unique<std::vector<float>>(elements_);
  }
  // The deleter holds the state, so a buffer released after the pool is
  // gone still finds a live mutex (and is then simply freed with the state).
  return std::shared_ptr<std::vector<float>>(
      buffer.release(), [state = state_](std::vector<float>* b) {
        std::unique_ptr<std::vector<float>> owned(b);
        absl::MutexLock lock(&state->mu);
        if (static_cast<int>(state->idle.size()) < state->max_idle) {
          state->idle.push_back(std::move(owned));
        } else {
          --state->live;
        }
      });
}

int StagingPool::idle() const {
  absl::MutexLock lock(&state_->mu);
  return static_cast<int>(state_->idle.size());
}

int64_t StagingPool::allocations() const {
  absl::MutexLock lock(&state_->mu);
  return state_->allocations;
}

int64_t StagingPool::live() const {
  absl::MutexLock lock(&state_->mu);
  return state_->live;
}

}  // namespace asgd
