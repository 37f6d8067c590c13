#include "worker/ps/model_feed.h"

#include <utility>

#include "common/status_macros.h"

namespace asgd {
namespace {
constexpr char kRecovered[] =
    "the pool answers again; resuming from a fresh pull";
}  // namespace

ModelFeed::ModelFeed(const ModelFeedOptions& options, ParamClient* client,
                     RetryPolicy* retry, PullFn pull)
    : options_(options), retry_(retry), pull_(std::move(pull)) {
  if (options.overlap_pulls) {
    prefetcher_ = std::make_unique<ModelPrefetcher>(client, options.size,
                                                    options.prefetch_pull);
  }
}

void ModelFeed::PushCompleted() {
  if (prefetcher_ != nullptr) prefetcher_->Request();
}

void ModelFeed::PushSettled(bool stale_drop) {
  need_pull_ = true;
  stale_drop_ = stale_drop;
}

absl::Status ModelFeed::Refresh(std::vector<float>* params,
                                std::vector<uint64_t>* versions) {
  if (prefetcher_ == nullptr) {
    if (need_pull_) {
      ASGD_RETURN_IF_ERROR(pull_(params, versions));
      ++models_;
    }
    need_pull_ = false;
    return absl::OkStatus();
  }
  bool taken;
  if (stale_drop_) {
    // A model pulled before the drop may be waiting: take it, then wait for
    // the one asked for after it.
    ASGD_ASSIGN_OR_RETURN(taken, Take(true, params, versions));
    if (prefetcher_->pull_in_flight()) {
      ASGD_ASSIGN_OR_RETURN(taken, Take(true, params, versions));
    }
    stale_drop_ = false;
  } else {
    // Ahead of the pull on the wire by max_overlapped_steps: wait.
    const bool wait = steps_on_model_ >= options_.max_overlapped_steps &&
                      prefetcher_->pull_in_flight();
    ASGD_ASSIGN_OR_RETURN(taken, Take(wait, params, versions));
  }
  if (taken) steps_on_model_ = 0;
  need_pull_ = false;
  return absl::OkStatus();
}

absl::StatusOr<bool> ModelFeed::Take(bool wait, std::vector<float>* params,
                                     std::vector<uint64_t>* versions) {
  for (;;) {
    absl::StatusOr<bool> taken = wait ? prefetcher_->Wait(params, versions)
                                      : prefetcher_->TakeIfReady(params, versions);
    if (taken.ok()) {
      if (*taken) {
        retry_->Succeeded(kRecovered);
        ++models_;
      }
      return *taken;
    }
    ASGD_RETURN_IF_ERROR(retry_->BackOff(taken.status(), "pull"));
    prefetcher_->Request();
    wait = true;
  }
}

}  // namespace asgd
