#include "worker/pipeline/data_upstream.h"

#include <algorithm>
#include <utility>

namespace asgd {

DataUpstream::DataUpstream(BatchSource* source, const BatchShape& shape,
                           int input_dim, int labels_per_row,
                           const ExampleSet* heldout, const LoopOptions& loop,
                           LoopReporter* reporter, TrainResult* result,
                           std::function<std::string()> extra)
    : source_(source),
      loop_(loop),
      reporter_(reporter),
      result_(result),
      extra_(std::move(extra)),
      buffer_(shape.examples, shape.steps, input_dim, labels_per_row),
      heldout_(heldout),
      last_answer_(reporter->clock()->Now()) {
  // Held-out minibatches of at most the training minibatch's rows.
  if (heldout_ != nullptr && heldout_->num_examples() > 0 &&
      heldout_->steps() <= shape.rows()) {
    heldout_per_batch_ = std::max(1, shape.rows() / heldout_->steps());
    heldout_buffer_ = std::make_unique<BatchBuffer>(
        heldout_per_batch_, heldout_->steps(), heldout_->input_dim(),
        heldout_->labels_per_row());
  }
}

void DataUpstream::StartEvaluation() {
  reporter_->MarkEvalStarted();
  for (auto& ids :
       HeldoutBatches(*heldout_, heldout_per_batch_, loop_.eval_frames)) {
    eval_queue_.push_back(std::move(ids));
  }
  eval_correct_ = eval_labelled_ = 0;
}

StageBatch DataUpstream::NextEvaluation() {
  const std::vector<int64_t> ids = std::move(eval_queue_.front());
  eval_queue_.pop_front();
  BatchBuffer& b = *heldout_buffer_;
  heldout_->Fill(ids, b.inputs.data(), b.labels.data());
  StageBatch batch;
  batch.seq = static_cast<uint64_t>(drawn_++);
  batch.sequences = static_cast<int>(ids.size());
  batch.steps = heldout_->steps();
  batch.evaluate = true;
  const int64_t rows = int64_t{batch.sequences} * batch.steps;
  batch.values.assign(b.inputs.begin(),
                      b.inputs.begin() + rows * heldout_->input_dim());
  batch.labels.assign(b.labels.begin(),
                      b.labels.begin() + rows * heldout_->labels_per_row());
  ++eval_outstanding_;
  Drawn d;
  d.evaluate = true;
  pending_.push_back(d);
  return batch;
}

void DataUpstream::BookEvaluation(const StageGrad& grad) {
  --eval_outstanding_;
  eval_correct_ += grad.correct;
  eval_labelled_ += grad.labelled;
  if (eval_outstanding_ > 0 || !eval_queue_.empty()) return;
  EvalPoint point;
  point.seconds = reporter_->Seconds();
  point.frames = result_->frames;
  point.version = static_cast<uint64_t>(result_->steps);
  point.accuracy = eval_labelled_ > 0
                       ? static_cast<double>(eval_correct_) / eval_labelled_
                       : 0.0;
  reporter_->Record(point, result_);
}

absl::StatusOr<std::optional<StageBatch>> DataUpstream::Receive() {
  if (!eval_queue_.empty()) return std::optional<StageBatch>(NextEvaluation());
  if (data_done_ || reporter_->Done(trained_)) {
    data_done_ = true;
    return std::optional<StageBatch>();
  }
  if (heldout_buffer_ != nullptr && eval_outstanding_ == 0 &&
      result_->steps != last_eval_steps_ &&
      reporter_->EvalDue(result_->steps)) {
    last_eval_steps_ = result_->steps;
    StartEvaluation();
    if (!eval_queue_.empty()) {
      return std::optional<StageBatch>(NextEvaluation());
    }
  }
  const absl::Time t0 = reporter_->clock()->Now();
  absl::StatusOr<bool> more = source_->Next(&buffer_);
  if (!more.ok()) return more.status();
  if (!*more) {
    data_done_ = true;
    return std::optional<StageBatch>();
  }
  ++trained_;
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
  if (d.evaluate) {
    BookEvaluation(grad);
    return absl::OkStatus();
  }
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
