#include "worker/loop/loop.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/strings/cord.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/process_stats.h"
#include "common/status_macros.h"
#include "worker/data/make_examples.h"

namespace asgd {

absl::Status ValidateLoopOptions(const LoopOptions& o) {
  if (o.batch_size < 1 || !(o.slowdown >= 1.0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "batch_size must be >= 1 and slowdown >= 1, got ", o.batch_size,
        " and ", o.slowdown));
  }
  if (o.max_steps < 0 || !(o.epochs >= 0) || !(o.max_seconds >= 0) ||
      o.log_every < 0 || o.eval_every < 0 || !(o.eval_every_s >= 0) ||
      o.eval_frames < 0) {
    return absl::InvalidArgumentError(
        "max_steps, epochs, max_seconds, log_every, eval_every, eval_every_s "
        "and eval_frames must not be negative");
  }
  return absl::OkStatus();
}

absl::Status CheckLoopSetup(const LoopOptions& options,
                            const ModelBackend& backend,
                            const ExampleSet& train, int64_t model_size,
                            bool streamed) {
  ASGD_RETURN_IF_ERROR(ValidateLoopOptions(options));
  if (ModelParamCount(backend.spec()) != model_size) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the backend's model has ", ModelParamCount(backend.spec()),
        " parameters, the one to train ", model_size));
  }
  if (!streamed && train.num_examples() == 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "worker ", options.worker_index,
        " has no training data (more workers than utterances?)"));
  }
  if (train.input_dim() != backend.spec().input_dim()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the data gives ", train.input_dim(),
        " inputs per row but the model takes ", backend.spec().input_dim()));
  }
  if (ShapeOfBatch(train, options.batch_size).rows() > backend.max_rows()) {
    return absl::InvalidArgumentError(
        "a minibatch is larger than the backend was made for");
  }
  return absl::OkStatus();
}

namespace {

constexpr absl::string_view kNonFiniteStepUrl = "type.asgd/asgd.NonFiniteStep";

// |x| <= the largest float: false for NaN and Inf.
inline bool Finite(float x) {
  return std::fabs(x) <= std::numeric_limits<float>::max();
}

}  // namespace

absl::Status CheckStepFinite(const BatchResult& r, absl::Span<const float> grad,
                             const Batch& batch, const LoopOptions& options,
                             int64_t step, double epochs,
                             absl::string_view phase) {
  bool finite = std::isfinite(r.loss) && r.gradient_finite;
  if (finite) {
    // Branch-free, so that it vectorises.
    int bad = 0;
    for (const float g : grad) bad |= !Finite(g);
    finite = bad == 0;
  }
  if (finite) return absl::OkStatus();
  std::string what;
  if (!std::isfinite(r.loss))
    what = absl::StrCat("a non-finite loss (", r.loss, ")");
  for (size_t i = 0; i < grad.size(); ++i) {
    if (Finite(grad[i])) continue;
    absl::StrAppend(&what,
                    what.empty()
                        ? absl::StrCat("a finite loss (", r.loss, ") but a ")
                        : " and a ",
                    "non-finite gradient (element ", i, " of ", grad.size(),
                    " is ", grad[i], ")");
    break;
  }
  if (!r.gradient_finite && std::isfinite(r.loss)) {
    what = absl::StrCat("a finite loss (", r.loss,
                        ") but a non-finite gradient (on the backend)");
  }
  float max_input = 0;
  bool inputs_finite = true;
  for (const float x : batch.inputs) {
    inputs_finite &= Finite(x);
    if (Finite(x)) max_input = std::max(max_input, std::fabs(x));
  }
  absl::Status status = absl::FailedPreconditionError(absl::StrFormat(
      "worker %d: %s step %d (minibatch %d of this run, epoch %.2f of %s) "
      "gave %s; the minibatch's largest |input| is %g%s. Nothing of it was "
      "pushed or applied: the worker stops before it reaches the servers "
      "(huge inputs: bad data, see --max_feature_magnitude; ordinary ones: "
      "a diverging model, e.g. too high a learning rate)",
      options.worker_index, phase, step, step, epochs,
      options.data_source.empty() ? "its data" : options.data_source, what,
      max_input, inputs_finite ? "" : " (and some inputs are NaN or Inf)"));
  status.SetPayload(kNonFiniteStepUrl, absl::Cord("1"));
  return status;
}

bool IsNonFiniteStep(const absl::Status& status) {
  return status.code() == absl::StatusCode::kFailedPrecondition &&
         status.GetPayload(kNonFiniteStepUrl).has_value();
}

int LabelledFrames(const Batch& batch) {
  const int rows = batch.rows();
  if (rows <= 0) return 0;
  const size_t heads = batch.labels.size() / rows;
  int frames = 0;
  for (size_t i = 0; i < batch.labels.size(); i += std::max<size_t>(heads, 1)) {
    frames += batch.labels[i] != kNoLabel;
  }
  return frames;
}

std::vector<std::vector<int64_t>> HeldoutBatches(const ExampleSet& data,
                                                 int examples_per_batch,
                                                 int64_t max_frames) {
  const int64_t n = data.num_examples();
  const int64_t max_examples =
      max_frames > 0
          ? std::max<int64_t>(1, max_frames /
                                     std::max(1, data.max_labelled_steps()))
          : 0;
  const int64_t stride =
      max_examples > 0 ? std::max<int64_t>(1, n / max_examples) : 1;
  const int per = std::max(1, examples_per_batch);
  std::vector<std::vector<int64_t>> batches;
  std::vector<int64_t> ids;
  for (int64_t e = 0; e < n; e += stride) {
    ids.push_back(e);
    if (static_cast<int>(ids.size()) < per && e + stride < n) continue;
    batches.push_back(std::move(ids));
    ids.clear();
  }
  return batches;
}

absl::StatusOr<double> EvaluateAccuracy(ModelBackend* backend,
                                        absl::Span<const float> params,
                                        const ExampleSet& data,
                                        int examples_per_batch,
                                        int64_t max_frames) {
  if (data.num_examples() == 0 || data.labelled_frames() == 0) {
    return absl::FailedPreconditionError("no frames to evaluate");
  }
  const int per = std::max(1, examples_per_batch);
  const int heads = data.labels_per_row();
  BatchBuffer batch(per, data.steps(), data.input_dim(), heads);
  std::vector<int32_t> predicted(batch.labels.size());
  int64_t correct = 0, total = 0;
  for (const std::vector<int64_t>& ids :
       HeldoutBatches(data, examples_per_batch, max_frames)) {
    const int k = static_cast<int>(ids.size());
    const int rows = k * data.steps();
    data.Fill(ids, batch.inputs.data(), batch.labels.data());
    const Batch view{k, data.steps(),
                     absl::MakeConstSpan(batch.inputs.data(),
                                         int64_t{rows} * data.input_dim()),
                     absl::MakeConstSpan(batch.labels.data(), rows * heads)};
    ASGD_RETURN_IF_ERROR(backend->Predict(
        params, view, absl::MakeSpan(predicted.data(), rows * heads)));
    for (int r = 0; r < rows * heads; ++r) {
      if (batch.labels[r] == kNoLabel) continue;
      correct += predicted[r] == batch.labels[r];
      ++total;
    }
  }
  if (total == 0) return absl::FailedPreconditionError("no frames to evaluate");
  return static_cast<double>(correct) / total;
}

absl::StatusOr<float> LocalLearningRate(
    float explicit_rate, const std::map<std::string, std::string>& attributes) {
  if (explicit_rate > 0) return explicit_rate;
  auto it = attributes.find("learning_rate");
  float lr = 0;
  if (it == attributes.end() || !absl::SimpleAtof(it->second, &lr) ||
      !(lr > 0)) {
    return absl::FailedPreconditionError(
        "local SGD needs a learning rate: the servers do not publish one; "
        "pass it explicitly");
  }
  return lr;
}

int64_t LockstepSteps(double epochs, int64_t total_examples, int num_workers,
                      int examples_per_batch) {
  const int64_t steps = static_cast<int64_t>(
      epochs * total_examples /
      (static_cast<double>(std::max(num_workers, 1)) *
       std::max(examples_per_batch, 1)));
  return std::max<int64_t>(steps, 1);
}

void LogSummary(std::ostream* log, int worker_index, const TrainResult& r,
                absl::string_view done_extra) {
  if (log == nullptr) return;
  *log << absl::StrFormat(
              "worker %d done: %d steps, %d pushes, %d frames in %.1f s "
              "(%.0f frames/s)",
              worker_index, r.steps, r.pushes, r.frames, r.seconds,
              r.frames / std::max(r.seconds, 1e-9))
       << done_extra << std::endl;
  const PhaseTimes& ph = r.phases;
  const double busy = ph.data + ph.pull + ph.compute + ph.push + ph.idle;
  *log << absl::StrFormat(
              "worker %d phases: data %.1f s, pull %.1f s (load %.1f s), "
              "compute %.1f s, push %.1f s, idle %.1f s; blocked on "
              "communication %.0f%% of step time",
              worker_index, ph.data, ph.pull, ph.load, ph.compute, ph.push,
              ph.idle,
              100 * (ph.pull + ph.push) / std::max(busy, 1e-9))
       << std::endl;
  if (const int64_t peak = ReadProcessStats().peak_resident_bytes; peak > 0) {
    *log << absl::StrFormat("worker %d memory: peak resident %.1f MB",
                            worker_index, peak / 1e6)
         << std::endl;
  }
  if (r.heldout_accuracy >= 0) {
    *log << absl::StrFormat("worker %d held-out frame accuracy: %.1f%%",
                            worker_index, 100 * r.heldout_accuracy)
         << std::endl;
  }
}

LoopReporter::LoopReporter(const LoopOptions& options, ModelBackend* backend,
                           const ExampleSet* heldout, std::ostream* log)
    : options_(options),
      backend_(backend),
      heldout_(heldout),
      log_(log),
      clock_(options.clock != nullptr ? options.clock : RealClock()),
      start_(clock_->Now()),
      last_eval_(start_),
      window_start_(start_) {}

double LoopReporter::Seconds() const {
  return absl::ToDoubleSeconds(clock_->Now() - start_);
}

bool LoopReporter::Done(int64_t steps) const {
  return (options_.max_steps > 0 && steps >= options_.max_steps) ||
         (options_.max_seconds > 0 && Seconds() >= options_.max_seconds);
}

void LoopReporter::BookStep(const BatchResult& r, int frames,
                            const PhaseTimes& step, TrainResult* result) {
  ++result->steps;
  result->frames += frames;
  result->last_loss = r.loss;
  window_frames_ += frames;
  window_labelled_ += r.labelled;
  window_correct_ += r.correct;
  window_loss_ += r.loss * r.labelled;
  PhaseTimes& total = result->phases;
  total.data += step.data;
  total.pull += step.pull;
  total.load += step.load;
  total.compute += step.compute;
  total.push += step.push;
  total.idle += step.idle;
  if (options_.observer != nullptr) {
    options_.observer->OnStep(StepReport{frames, r.loss, r.correct,
                                         r.labelled, step.data, step.pull,
                                         step.compute, step.push});
  }
}

void LoopReporter::MaybeLog(const TrainResult& result, double epochs,
                            absl::string_view extra, bool force) {
  if (log_ == nullptr || options_.log_every <= 0 || window_labelled_ == 0) {
    return;
  }
  if (!force && result.steps % options_.log_every != 0) return;
  const absl::Time now = clock_->Now();
  const double secs = absl::ToDoubleSeconds(now - window_start_);
  *log_ << absl::StrFormat(
               "worker %d step %d epoch %.2f loss %.3f batch-acc %.1f%% "
               "frames/s %.0f",
               options_.worker_index, result.steps, epochs,
               window_loss_ / window_labelled_,
               100.0 * window_correct_ / window_labelled_,
               window_frames_ / std::max(secs, 1e-9))
        << extra << std::endl;
  window_start_ = now;
  window_frames_ = window_labelled_ = window_correct_ = 0;
  window_loss_ = 0;
}

bool LoopReporter::EvalDue(int64_t steps) const {
  if (heldout_ == nullptr || heldout_->num_examples() == 0) return false;
  const bool by_steps =
      options_.eval_every > 0 && steps > 0 && steps % options_.eval_every == 0;
  const bool by_time =
      options_.eval_every_s > 0 &&
      clock_->Now() - last_eval_ >= absl::Seconds(options_.eval_every_s);
  return by_steps || by_time;
}

absl::Status LoopReporter::Evaluate(absl::Span<const float> params,
                                    uint64_t version, bool full,
                                    TrainResult* result) {
  if (heldout_ == nullptr || heldout_->num_examples() == 0) {
    return absl::OkStatus();
  }
  last_eval_ = clock_->Now();
  EvalPoint point;
  point.seconds = Seconds();
  point.frames = result->frames;
  point.version = version;
  const int per =
      std::max(1, backend_->max_rows() / std::max(1, heldout_->steps()));
  ASGD_ASSIGN_OR_RETURN(
      point.accuracy,
      EvaluateAccuracy(backend_, params, *heldout_, per,
                       full ? 0 : options_.eval_frames));
  Record(point, result);
  return absl::OkStatus();
}

void LoopReporter::MarkEvalStarted() { last_eval_ = clock_->Now(); }

void LoopReporter::Record(const EvalPoint& point, TrainResult* result) {
  result->evals.push_back(point);
  if (options_.observer != nullptr) {
    options_.observer->OnHeldoutAccuracy(point.accuracy);
  }
  if (log_ != nullptr) {
    *log_ << absl::StrFormat(
                 "worker %d eval t=%.1f frames=%d version=%d held-out frame "
                 "accuracy: %.1f%%",
                 options_.worker_index, point.seconds, point.frames,
                 point.version, 100 * point.accuracy)
          << std::endl;
  }
}

}  // namespace asgd
