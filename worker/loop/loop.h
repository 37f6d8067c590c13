// The scaffold both training loops share (the parameter-server trainer,
// worker/ps/trainer.h, and the decentralized one, worker/peer/
// decentralized_trainer.h): their common options, the observer hooks, the
// result, progress lines, the held-out evaluation cadence and the local
// learning-rate lookup.
//
// A loop calls, per run:
//   LoopReporter reporter(options, backend, heldout, log);
//   ... each step: reporter.BookStep(r, phases, &result);
//                  reporter.MaybeLog(result, epochs, " max-staleness 3");
//                  if (reporter.EvalDue(result.steps)) reporter.Evaluate(...);
//   ... at the end: reporter.MaybeLog(result, epochs, extra, /*force=*/true);
// which logs the lines the experiment scripts parse:
//   worker 0 step 200 epoch 0.41 loss 1.873 batch-acc 44.5% frames/s 5120 <extra>
//   worker 0 eval t=12.3 frames=51200 version=400 held-out frame accuracy: 61.2%
//
// Thread-safety: a LoopReporter belongs to its loop's thread.
#ifndef ASGD_WORKER_LOOP_LOOP_H_
#define ASGD_WORKER_LOOP_LOOP_H_

#include <cstdint>
#include <map>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "model/backend.h"
#include "worker/data/examples.h"
#include "worker/loop/clock.h"

namespace asgd {

// One training step as observers see it.
struct StepReport {
  int frames = 0;       // labelled frames of the minibatch
  double loss = 0;      // mean cross-entropy of the minibatch
  int correct = 0;      // outputs classified right, of
  int labelled = 0;     // the labelled outputs: the frames, or a multi-frame
                        // model's labelled heads
  double data_seconds = 0, pull_seconds = 0, compute_seconds = 0,
         push_seconds = 0;
};

// A push's outcome as observers see it.
struct PushReport {
  uint64_t max_staleness = 0;  // largest staleness any server reported
  int dropped = 0;             // servers that dropped it as too stale
};

// Monitoring hooks, called on the training thread.
class TrainerObserver {
 public:
  virtual ~TrainerObserver() = default;
  virtual void OnStep(const StepReport& step) = 0;
  virtual void OnPush(const PushReport& push) = 0;
  virtual void OnHeldoutAccuracy(double accuracy) = 0;
  // A call failed and will be retried (server down, restarting...).
  virtual void OnRpcRetry() {}
};

// What every training loop takes.
struct LoopOptions {
  int worker_index = 0;
  // Labelled frames per minibatch (sequence models: whole chunks, about
  // this many frames; see worker/data/make_examples.h).
  int batch_size = 256;
  int64_t max_steps = 0;  // 0: no limit
  double epochs = 1.0;    // passes over the data; 0: no limit
  // Stop after this many seconds of training (0: no limit): a wall-clock
  // budget. Lockstep modes (sync, allreduce) refuse it: their workers must
  // run the same number of steps.
  double max_seconds = 0;
  // > 1 makes a straggler on purpose: after each minibatch the worker idles
  // (slowdown - 1) times the minibatch's compute time.
  double slowdown = 1.0;
  int log_every = 100;         // steps between progress lines; 0: none
  int eval_every = 0;          // steps; 0: off
  double eval_every_s = 0;     // seconds; 0: off
  int64_t eval_frames = 0;     // held-out frames per periodic eval; 0: all
  uint64_t seed = 1;           // of the minibatch order
  TrainerObserver* observer = nullptr;  // may be null; outlives the loop
  Clock* clock = nullptr;               // null: RealClock()
  // What the minibatches come from, for messages ("corpus /data/c, part 0
  // of 2"); may be empty.
  std::string data_source;
};

// InvalidArgument unless batch_size >= 1, slowdown >= 1, and the counts,
// periods and budgets are not negative.
absl::Status ValidateLoopOptions(const LoopOptions& options);

// What both loops check before they start: the options are valid, the
// backend computes a model of `model_size` parameters, and `train` has
// examples of the model's input size whose minibatches fit the backend.
// With `streamed`, `train` only gives the shape of examples that a streamed
// source draws, and may itself hold none. InvalidArgument or
// FailedPrecondition saying what is wrong.
absl::Status CheckLoopSetup(const LoopOptions& options,
                            const ModelBackend& backend,
                            const ExampleSet& train, int64_t model_size,
                            bool streamed);

// Seconds spent per phase of the loop.
struct PhaseTimes {
  double data = 0;     // drawing minibatches (and pool fetches)
  double pull = 0;     // pulling the model
  double load = 0;     // of pull: loading pulled models onto the backend
  double compute = 0;  // forward and backward
  double push = 0;     // pushing, or waiting for the wire or for peers
  double idle = 0;     // injected slowdown
};

struct EvalPoint {
  double seconds = 0;    // since the loop started
  int64_t frames = 0;    // frames this worker processed so far
  uint64_t version = 0;  // model version (server 0's, or the step count)
  double accuracy = 0;
};

struct TrainResult {
  int64_t steps = 0;   // minibatches computed
  int64_t pushes = 0;  // pushes sent (parameter-server modes)
  int64_t frames = 0;  // labelled frames computed
  double seconds = 0;
  double last_loss = 0;
  double heldout_accuracy = -1;  // -1 when there is no held-out data
  int64_t pushes_dropped = 0;
  int64_t pushes_busy = 0;
  PhaseTimes phases;
  std::vector<EvalPoint> evals;
  std::vector<float> params;  // the final model
};

// The check every loop makes on a computed minibatch before its gradient
// goes anywhere (a push, an allreduce, the local model): a loss or a
// gradient element that is NaN or Inf stops the worker, since applied
// anywhere it would wreck the model. The error blames the minibatch, not
// the servers: kFailedPrecondition (IsNonFiniteStep) naming the worker, the
// step (`step`: the minibatch's 1-based number in this run, `phase`:
// "training" or "warm start"), the epoch, options.data_source, the loss,
// the first non-finite gradient element and the batch's largest |input|
// (huge inputs: the data; ordinary ones: a diverging model), and saying
// that nothing of it reached the servers. A gradient the backend kept
// (`grad` empty) is judged by r.gradient_finite. Costs one pass over the
// gradient, without branches (the loss is checked first: one number).
absl::Status CheckStepFinite(const BatchResult& r, absl::Span<const float> grad,
                             const Batch& batch, const LoopOptions& options,
                             int64_t step, double epochs,
                             absl::string_view phase);

// Whether `status` is CheckStepFinite's error.
bool IsNonFiniteStep(const absl::Status& status);

// The rows of `batch` whose own frame is labelled: with a multi-frame
// model's labels (output_frames per row) the first of each row, so that a
// row counts once however many heads it has.
int LabelledFrames(const Batch& batch);

// The examples EvaluateAccuracy evaluates, in batches of at most
// `examples_per_batch`: all of `data`'s, or with max_frames > 0 an evenly
// strided subset of about that many frames.
std::vector<std::vector<int64_t>> HeldoutBatches(const ExampleSet& data,
                                                 int examples_per_batch,
                                                 int64_t max_frames);

// Frame accuracy of `params` on the labelled rows of `data`, in batches of
// `examples_per_batch` examples (at most the backend's max_rows rows); a
// multi-frame model's over every labelled head (each row predicting its
// frame and the next output_frames - 1).
// With max_frames > 0, on an evenly strided subset of about that many
// frames. FailedPrecondition when there is nothing to evaluate.
absl::StatusOr<double> EvaluateAccuracy(ModelBackend* backend,
                                        absl::Span<const float> params,
                                        const ExampleSet& data,
                                        int examples_per_batch,
                                        int64_t max_frames = 0);

// The learning rate of local SGD: `explicit_rate` when > 0, else the pool's
// "learning_rate" attribute; FailedPrecondition when neither is usable.
absl::StatusOr<float> LocalLearningRate(
    float explicit_rate, const std::map<std::string, std::string>& attributes);

// Steps per worker when every worker must run the same number (sync,
// allreduce): `epochs` passes over `total_examples` shared by `num_workers`
// workers in batches of `examples_per_batch`; at least 1.
int64_t LockstepSteps(double epochs, int64_t total_examples, int num_workers,
                      int examples_per_batch);

// The end-of-run lines both kinds of worker print (wrapped here):
//   worker 1 done: 500 steps, 12 pushes, 128000 frames in 10.2 s
//       (12549 frames/s)<done_extra>
//   worker 1 phases: data 0.2 s, pull 0.0 s (load 0.0 s), compute 7.9 s,
//       push 1.1 s, idle 0.0 s; blocked on communication 12% of step time
// (load: the part of pull spent loading models onto a resident backend)
//   worker 1 memory: peak resident 412.3 MB    (the process's, where known)
//   worker 1 held-out frame accuracy: 75.0%     (when evaluated)
void LogSummary(std::ostream* log, int worker_index, const TrainResult& result,
                absl::string_view done_extra);

class LoopReporter {
 public:
  // `heldout` may be null (no evaluations). Pointers must outlive the
  // reporter. Starts the clocks.
  LoopReporter(const LoopOptions& options, ModelBackend* backend,
               const ExampleSet* heldout, std::ostream* log);

  Clock* clock() const { return clock_; }
  // Seconds since construction.
  double Seconds() const;
  // True once the loop has run max_steps steps or max_seconds seconds.
  bool Done(int64_t steps) const;

  // Books one computed minibatch of `frames` labelled frames
  // (LabelledFrames): steps, frames, loss, the progress window, the phase
  // times, and tells the observer.
  void BookStep(const BatchResult& r, int frames, const PhaseTimes& step_phases,
                TrainResult* result);

  // The progress line every log_every steps (or now, with force), with
  // `extra` appended.
  void MaybeLog(const TrainResult& result, double epochs,
                absl::string_view extra, bool force = false);

  // True when an evaluation is due after result.steps steps (by steps or
  // by time). Always false without held-out data.
  bool EvalDue(int64_t steps) const;

  // Evaluates `params` (all frames when `full`, else eval_frames), appends
  // the point to result->evals, tells the observer and logs the eval line.
  absl::Status Evaluate(absl::Span<const float> params, uint64_t version,
                        bool full, TrainResult* result);
  // For an accuracy measured elsewhere (a pipeline's evaluation
  // minibatches): MarkEvalStarted() when the evaluation starts (the
  // time-based cadence counts from there), Record() with its result
  // (appends `point`, tells the observer, logs the eval line).
  void MarkEvalStarted();
  void Record(const EvalPoint& point, TrainResult* result);

 private:
  const LoopOptions options_;
  ModelBackend* const backend_;
  const ExampleSet* const heldout_;
  std::ostream* const log_;
  Clock* const clock_;
  const absl::Time start_;
  absl::Time last_eval_;
  absl::Time window_start_;
  int64_t window_frames_ = 0, window_labelled_ = 0, window_correct_ = 0;
  double window_loss_ = 0;
};

}  // namespace asgd

#endif  // ASGD_WORKER_LOOP_LOOP_H_
