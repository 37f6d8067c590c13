#include "worker/ps/pool_source.h"

#include <algorithm>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace asgd {

PoolSource::PoolSource(PoolFetch fetch, const ExampleSet* data, uint64_t seed,
                       int examples_per_batch, double epochs)
    : fetch_(std::move(fetch)),
      data_(data),
      seed_(seed),
      batch_size_(examples_per_batch),
      epochs_(epochs) {}

absl::StatusOr<bool> PoolSource::Next(BatchBuffer* batch) {
  if (batch->sequences != batch_size_) {
    return absl::InternalError("pool batch size changed");
  }
  if (queue_.empty()) {
    if (exhausted_) return false;
    ASGD_ASSIGN_OR_RETURN(
        PoolGrant grant, fetch_(data_->num_examples(), batch_size_, epochs_, 2));
    if (grant.batches_per_epoch < 1) {
      return absl::FailedPreconditionError(
          "the minibatch pool reports no batches per epoch");
    }
    queue_.assign(grant.batch_ids.begin(), grant.batch_ids.end());
    std::reverse(queue_.begin(), queue_.end());
    per_epoch_ = grant.batches_per_epoch;
    exhausted_ = grant.exhausted;
    if (queue_.empty()) return false;
  }
  const uint64_t id = queue_.back();
  queue_.pop_back();
  const uint64_t epoch = id / per_epoch_;
  if (!order_epoch_.has_value() || *order_epoch_ != epoch) {
    order_ = EpochOrder(data_->num_examples(), seed_, epoch);
    order_epoch_ = epoch;
  }
  const int64_t first = static_cast<int64_t>(id % per_epoch_) * batch_size_;
  if (first + batch_size_ > static_cast<int64_t>(order_.size())) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the minibatch pool handed out batch ", id,
        ", beyond this worker's ", order_.size(), " examples"));
  }
  ids_.assign(order_.begin() + first, order_.begin() + first + batch_size_);
  FillBatch(*data_, ids_, batch);
  ++taken_;
  return true;
}

double PoolSource::epochs() const {
  return static_cast<double>(taken_) * batch_size_ / data_->num_examples();
}

}  // namespace asgd
