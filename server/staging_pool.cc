#include "server/staging_pool.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <utility>

namespace asgd {
namespace {

// Gives the whole pages inside [data, data + bytes) back to the kernel: they
// read as zeros and take no memory until written again. The vector's
// constructor zero-fills (and so touches) every page; a staging buffer's
// contents do not matter, and a push that stalls after a few bytes should not
// hold a model-sized buffer in memory.
void ReleasePages(void* data, size_t bytes) {
  const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const uintptr_t begin =
      (reinterpret_cast<uintptr_t>(data) + page - 1) / page * page;
  const uintptr_t end = (reinterpret_cast<uintptr_t>(data) + bytes) / page * page;
  if (end > begin) {
    // Advice only: a failure leaves the pages resident, nothing else.
    madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED);
  }
}

}  // namespace

StagingPool::StagingPool(int64_t elements, int max_idle, int64_t max_bytes)
    : elements_(elements),
      state_(std::make_shared<State>(max_idle, max_bytes)) {}

std::shared_ptr<std::vector<float>> StagingPool::Acquire() {
  std::unique_ptr<std::vector<float>> buffer;
  {
    absl::MutexLock lock(&state_->mu);
    if (!state_->idle.empty()) {
      buffer = std::move(state_->idle.back());
      state_->idle.pop_back();
    } else {
      ++state_->allocations;
      ++state_->live;  // counted before the allocation, outside the lock
    }
  }
  if (buffer == nullptr) {
    buffer = std::make_unique<std::vector<float>>(elements_);
    ReleasePages(buffer->data(), buffer->size() * sizeof(float));
  }
  // The deleter holds the state, so a buffer released after the pool is
  // gone still finds a live mutex (and is then simply freed with the state).
  return std::shared_ptr<std::vector<float>>(
      buffer.release(), [state = state_](std::vector<float>* b) {
        std::unique_ptr<std::vector<float>> owned(b);
        absl::MutexLock lock(&state->mu);
        if (auto it = state->charges.find(b); it != state->charges.end()) {
          state->charged -= it->second;
          state->charges.erase(it);
        }
        if (static_cast<int>(state->idle.size()) < state->max_idle) {
          state->idle.push_back(std::move(owned));
        } else {
          --state->live;
        }
      });
}

bool StagingPool::Charge(const std::vector<float>* buffer, int64_t bytes) {
  if (bytes <= 0) return bytes == 0;
  absl::MutexLock lock(&state_->mu);
  if (bytes > state_->max_bytes - state_->charged) return false;
  state_->charged += bytes;
  state_->charges[buffer] += bytes;
  return true;
}

std::shared_ptr<std::vector<float>> StagingPool::AcquireCharged(
    int64_t bytes) {
  bytes = std::max<int64_t>(bytes, 0);
  {
    // Charged before the buffer is taken, so that a refusal costs no
    // allocation.
    absl::MutexLock lock(&state_->mu);
    if (bytes > state_->max_bytes - state_->charged) return nullptr;
    state_->charged += bytes;
  }
  std::shared_ptr<std::vector<float>> buffer = Acquire();
  absl::MutexLock lock(&state_->mu);
  state_->charges[buffer.get()] += bytes;
  return buffer;
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

int64_t StagingPool::charged_bytes() const {
  absl::MutexLock lock(&state_->mu);
  return state_->charged;
}

}  // namespace asgd
