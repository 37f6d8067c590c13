#include "worker/ps/model_prefetcher.h"

#include <utility>

namespace asgd {

ModelPrefetcher::ModelPrefetcher(ParamClient* client, int64_t size,
                                 PullInto pull)
    : client_(client),
      pull_(std::move(pull)),
      back_(size),
      second_buffer_(back_) {
  thread_ = std::thread([this] { Run(); });
}

ModelPrefetcher::~ModelPrefetcher() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  thread_.join();
}

void ModelPrefetcher::Request() {
  absl::MutexLock lock(&mu_);
  requested_ = true;
}

void ModelPrefetcher::Run() {
  // A pull starts when one is requested and the last one was taken (the back
  // buffer is free).
  auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return stop_ || (requested_ && !landed_);
  };
  for (;;) {
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(&ready));
      if (stop_) return;
      requested_ = false;
      in_flight_ = true;
      ++pulls_;
    }
    absl::Status status =
        pull_ ? pull_(absl::MakeSpan(back_), &back_versions_)
              : client_->Pull(absl::MakeSpan(back_), &back_versions_);
    absl::MutexLock lock(&mu_);
    in_flight_ = false;
    landed_ = true;
    status_ = std::move(status);
  }
}

absl::StatusOr<bool> ModelPrefetcher::TakeLocked(
    std::vector<float>* params, std::vector<uint64_t>* versions) {
  if (!landed_) return false;
  landed_ = false;
  if (!status_.ok()) return status_;
  params->swap(back_);
  versions->swap(back_versions_);
  return true;
}

absl::StatusOr<bool> ModelPrefetcher::TakeIfReady(
    std::vector<float>* params, std::vector<uint64_t>* versions) {
  absl::MutexLock lock(&mu_);
  return TakeLocked(params, versions);
}

absl::StatusOr<bool> ModelPrefetcher::Wait(std::vector<float>* params,
                                           std::vector<uint64_t>* versions) {
  absl::MutexLock lock(&mu_);
  auto settled = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return landed_ || (!in_flight_ && !requested_);
  };
  mu_.Await(absl::Condition(&settled));
  return TakeLocked(params, versions);
}

int64_t ModelPrefetcher::pulls() const {
  absl::MutexLock lock(&mu_);
  return pulls_;
}

bool ModelPrefetcher::pull_in_flight() const {
  absl::MutexLock lock(&mu_);
  return in_flight_ || requested_;
}

}  // namespace asgd
