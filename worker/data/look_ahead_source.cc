#include "worker/data/look_ahead_source.h"

#include <utility>

namespace asgd {

LookAheadSource::LookAheadSource(std::unique_ptr<BatchSource> inner,
                                 Announce announce,
                                 const BatchBuffer& prototype)
    : inner_(std::move(inner)),
      announce_(std::move(announce)),
      ahead_(prototype) {}

absl::StatusOr<bool> LookAheadSource::Next(BatchBuffer* batch) {
  if (!started_) {
    started_ = true;
    ahead_more_ = inner_->Next(&ahead_);
    ahead_epochs_ = inner_->epochs();
  }
  epochs_ = ahead_epochs_;
  if (!ahead_more_.ok() || !*ahead_more_) return ahead_more_;  // and stays
  std::swap(*batch, ahead_);
  ahead_more_ = inner_->Next(&ahead_);
  ahead_epochs_ = inner_->epochs();
  if (ahead_more_.ok() && *ahead_more_) announce_(ahead_.view());
  return true;
}

std::unique_ptr<BatchSource> StageAhead(std::unique_ptr<BatchSource> source,
                                        ModelBackend* backend,
                                        const BatchBuffer& prototype) {
  if (!backend->stages_batches()) return source;
  return std::make_unique<LookAheadSource>(
      std::move(source),
      [backend](const Batch& next) { backend->StageNext(next); }, prototype);
}

}  // namespace asgd
