#include "worker/pipeline/data_upstream.h"

#include <utility>

namespace asgd {

DataUpstream::DataUpstream(BatchSource* source, const BatchShape& shape,
                           int input_dim, int labels_per_row,
                           const LoopOptions& loop, LoopReporter* reporter,
                           TrainResult* result,
                           std::function<std::string()> extra)
    : source_(source),
      loop_(loop),
      reporter_(reporter),
      result_(result),
      extra_(std::move(extra)),
      buffer_(shape.examples, shape.steps, input_dim, labels_per_row),
      last_answer_(reporter->clock()->Now()) {}

absl::StatusOr<std::optional<StageBatch>> DataUpstream::Receive() {
  if (reporter_->Done(drawn_)) return std::optional<StageBatch>();
  const absl::Time t0 = reporter_->clock()->Now();
  absl::StatusOr<bool> more = source_->Next(&buffer_);
  if (!more.ok()) return more.status();
  if (!*more) return std::optional<StageBatch>();
  const Batch view = buffer_.view();
  StageBatch batch;
  batch.seq = static_cast<uint64_t>(drawn_++);
  batch.sequences = view.sequences;
  batch.steps = view.steps;
  batch.values.assign(view.inputs.begin(), view.inputs.end());
  batch.labels.assign(view.labels.begin(), view.labels.end());
  pending_.push_back(Drawn{
      LabelledFrames(view),
      absl::ToDoubleSeconds(reporter_->clock()->Now() - t0)});
  return std::optional<StageBatch>(std::move(batch));
}

absl::Status DataUpstream::Answer(StageGrad grad) {
  if (pending_.empty()) {
    return absl::InternalError("an answer for no minibatch");
  }
  const Drawn d = pending_.front();
  pending_.pop_front();
  const absl::Time now = reporter_->clock()->Now();
  PhaseTimes phases;
  phases.data = d.data_seconds;
  // Between two answers the pipeline computes (this stage's and the later
  // stages' passes overlap; this is the wall time the step took).
  phases.compute = std::max(
      0.0, absl::ToDoubleSeconds(now - last_answer_) - d.data_seconds);
  last_answer_ = now;
  BatchResult r;
  r.loss = grad.loss;
  r.labelled = grad.labelled;
  r.correct = grad.correct;
  reporter_->BookStep(r, d.frames, phases, result_);
  if (loop_.log_every > 0 && result_->steps % loop_.log_every == 0) {
    reporter_->MaybeLog(*result_, source_->epochs(), extra_());
  }
  return absl::OkStatus();
}

absl::Status DataUpstream::Finish() {
  reporter_->MaybeLog(*result_, source_->epochs(), extra_(), /*force=*/true);
  return absl::OkStatus();
}

}  // namespace asgd
