// Trainer: a worker's training loop and held-out evaluation.
//
// Modes (TrainMode):
//  * kAsgd: asynchronous SGD through the parameter-server pool. Each step
//    pulls the model (after each completed push), draws a minibatch, computes its gradient and adds it to an accumulator;
//    every push_every minibatches the accumulated average is pushed with the
//    versions it was computed from (the server scales the step for the
//    number of minibatches). With compute_while_pushing (SPEECH3: "if the PS
//    is busy, compute another minibatch"), a push runs in the background and
//    the worker keeps computing minibatches on its current model while it is
//    on the wire; they go out together in the next push (at most
//    max_minibatches_per_push of them; then it waits). A push the server
//    drops as too stale, or refuses as busy, is followed by a fresh pull.
//  * kSync: the synchronous baseline: pull, compute, push, and the server
//    (started with --sync_workers) applies the average of every worker's
//    gradient once per version. Every worker must run the same number of
//    steps (max_steps).
//  * kSgd: single-worker SGD baseline: plain SGD on a local copy of the
//    model (w -= lr * g) with no communication, then the model is handed to
//    the servers (an assign push) so it can be evaluated like the others.
//
// Data: from this worker's own part of the corpus (a seeded random order each
// epoch), or with use_pool from the shared minibatch pool on server 0, where
// a slow worker simply takes fewer batches. The loop ends after max_steps
// steps, or when the data's epochs are used up.
//
// Warm start: with warm_start_epochs > 0, worker 0 first trains plain SGD
// locally for that many epochs of its data and assigns the result to the
// servers; the other workers wait for that model before they start.
//
// slowdown > 1 makes a straggler on purpose: after each minibatch the worker
// idles (slowdown - 1) times the minibatch's compute time.
//
// Progress goes to `log` every log_every steps:
//   worker 0 step 200 epoch 0.41 loss 1.873 batch-acc 44.5% frames/s 5120 max-staleness 1
// and held-out evaluations every eval_every steps or eval_every_s seconds:
//   worker 0 eval t=12.3 frames=51200 version=400 held-out frame accuracy: 61.2%
//
// Thread-safety: one Trainer per thread. While Run() executes it uses its
// ParamClient (from up to two threads, as ParamClient allows) and backend.
#ifndef ASGD_WORKER_TRAINER_H_
#define ASGD_WORKER_TRAINER_H_

#include <cstdint>
#include <ostream>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "worker/dnn.h"
#include "worker/frames.h"
#include "worker/param_client.h"

namespace asgd {

enum class TrainMode { kAsgd, kSync, kSgd };

// One training step as the observer sees it.
struct StepReport {
  int frames = 0;
  double loss = 0;      // mean cross-entropy of the minibatch
  int correct = 0;      // frames classified right
  double data_seconds = 0, pull_seconds = 0, compute_seconds = 0,
         push_seconds = 0;
};

// Monitoring hooks, called on the training thread.
class TrainerObserver {
 public:
  virtual ~TrainerObserver() = default;
  virtual void OnStep(const StepReport& step) = 0;
  virtual void OnPush(const PushOutcome& outcome) = 0;
  virtual void OnHeldoutAccuracy(double accuracy) = 0;
  // A pull or push failed and will be retried (server down, restarting...).
  virtual void OnRpcRetry() {}
};
absl::StatusOr<TrainMode> ParseTrainMode(absl::string_view text);

struct TrainerOptions {
  TrainMode mode = TrainMode::kAsgd;
  int worker_index = 0;
  int batch_size = 256;
  int64_t max_steps = 0;  // 0: no limit
  double epochs = 1.0;    // passes over the data; 0: no limit
  int push_every = 1;     // minibatches per push (kAsgd)
  bool compute_while_pushing = false;
  // With compute_while_pushing, at most this many minibatches go into one
  // push (at least push_every): past it the worker waits for the wire.
  // Bounds the step the server takes (it scales with the count).
  int max_minibatches_per_push = 4;
  bool use_pool = false;
  uint64_t pool_seed = 1;  // frame order of pool epochs (same on all workers)
  double slowdown = 1.0;
  double warm_start_epochs = 0;
  absl::Duration warm_start_timeout = absl::Minutes(30);
  // Learning rate of local SGD (kSgd, warm start); 0: the pool's
  // "learning_rate" attribute.
  float local_learning_rate = 0;
  int log_every = 100;
  int eval_every = 0;          // steps; 0: off
  double eval_every_s = 0;     // seconds; 0: off
  int64_t eval_frames = 0;     // held-out frames per periodic eval; 0: all
  uint64_t seed = 1;
  TrainerObserver* observer = nullptr;  // may be null; outlives Run()
  // A failed pull or push of a transient kind (a server is down or
  // restarting: UNAVAILABLE, DEADLINE_EXCEEDED, CANCELLED, and ABORTED for a
  // push from versions a restarted server never reached) is retried with
  // exponential backoff (initial_backoff doubling up to max_backoff, times a
  // jitter in [0.5, 1]) for up to max_retry_time; the worker then resumes
  // from a fresh pull. A failed push is never resent: a server that got it
  // may have applied it. A push the server refused as overloaded (a
  // Refusal, common/refusal.h) is counted as busy and the worker pulls and
  // goes on at once. Decisions rest on the status code and the refusal,
  // never on the message text.
  absl::Duration initial_backoff = absl::Milliseconds(100);
  absl::Duration max_backoff = absl::Seconds(1);
  absl::Duration max_retry_time = absl::Minutes(10);
  // Seed of the backoff jitter; 0: from the worker index, the process id
  // and the clock, so that workers that lost the same server do not retry
  // in lockstep.
  uint64_t jitter_seed = 0;
};

// Seconds spent per phase of the loop.
struct PhaseTimes {
  double data = 0;     // drawing and splicing minibatches (and pool fetches)
  double pull = 0;     // pulling the model
  double compute = 0;  // forward and backward
  double push = 0;     // pushing, or waiting for a background push
  double idle = 0;     // injected slowdown
};

struct EvalPoint {
  double seconds = 0;      // since Run() started
  int64_t frames = 0;      // frames this worker processed so far
  uint64_t version = 0;    // server 0's version of the evaluated model
  double accuracy = 0;
};

struct TrainResult {
  int64_t steps = 0;         // minibatches computed
  int64_t pushes = 0;        // pushes sent (kAsgd, kSync)
  int64_t frames = 0;
  double seconds = 0;
  double last_loss = 0;
  double heldout_accuracy = -1;  // -1 when there is no held-out data
  int64_t pushes_dropped = 0;
  int64_t pushes_busy = 0;
  PhaseTimes phases;
  std::vector<EvalPoint> evals;
  std::vector<float> params;  // the last pulled model
};

// Frame accuracy of `params` on `data`, in batches of `batch` (at most the
// backend's max batch). With max_frames > 0, on an evenly strided subset of
// about that many frames.
absl::StatusOr<double> EvaluateAccuracy(DnnBackend* backend,
                                        absl::Span<const float> params,
                                        const FrameData& data, int batch,
                                        int64_t max_frames = 0);

// Evaluates `params` on `heldout` at `point` (seconds, frames, version set by
// the caller; all frames when `full`, else options.eval_frames), appends the
// point to `evals`, tells options.observer, and logs the line the experiment
// scripts parse:
//   worker 0 eval t=12.3 frames=51200 version=400 held-out frame accuracy: 61.2%
absl::Status EvaluateAndReport(DnnBackend* backend,
                               absl::Span<const float> params,
                               const FrameData& heldout,
                               const TrainerOptions& options, bool full,
                               EvalPoint point, std::vector<EvalPoint>* evals,
                               std::ostream* log);

// FailedPrecondition unless the pool's layout is the DNN of `spec`.
absl::Status CheckModelMatchesLayout(const DnnSpec& spec,
                                     const ModelLayout& layout);

// FailedPrecondition unless the DNN of `spec` fits a corpus of `info` with
// `context` frames each side: the same input size and class count.
absl::Status CheckModelMatchesCorpus(const DnnSpec& spec,
                                     const corpus::CorpusInfo& info,
                                     int context);

// A jitter seed that differs between workers and between runs.
uint64_t JitterSeed(int worker_index);

// Reconstructs the DnnSpec from the pool's tensors and attributes.
absl::StatusOr<DnnSpec> DnnSpecFromPool(const ParamClient& client);

class Trainer {
 public:
  // `heldout` may be null. All pointers must outlive the trainer.
  Trainer(ParamClient* client, DnnBackend* backend, const FrameData* train,
          const FrameData* heldout, const TrainerOptions& options,
          std::ostream* log);

  absl::StatusOr<TrainResult> Run();

 private:
  class BatchSource;
  class LocalSource;
  class PoolSource;

  absl::Status ValidateSetup() const;
  // Pull with retries (see TrainerOptions::max_retry_time).
  absl::Status PullWithRetry(absl::Span<float> params,
                             std::vector<uint64_t>* versions);
  // After a failed call: OK (and a backoff wait) when `error` is transient
  // and the retry budget lasts, else `error`.
  absl::Status BackOff(const absl::Status& error, absl::string_view what);
  absl::StatusOr<float> LocalLearningRate() const;
  // Plain SGD on result->params over `source` (at most max_steps steps if
  // > 0), no communication.
  absl::Status LocalSgd(BatchSource* source, float lr, int64_t max_steps,
                        TrainResult* result);
  absl::Status WarmStart(TrainResult* result, std::vector<uint64_t>* versions);
  absl::Status MaybeEvaluate(TrainResult* result, uint64_t version, bool force);
  void LogProgress(const TrainResult& result, double epochs, bool force);

  ParamClient* const client_;
  DnnBackend* const backend_;
  const FrameData* const train_;
  const FrameData* const heldout_;
  const TrainerOptions options_;
  std::ostream* const log_;

  absl::Time start_;
  absl::Time last_eval_;
  // Retry state: consecutive failures and when the first of them happened.
  int failures_ = 0;
  absl::Time first_failure_;
  uint64_t jitter_state_;
  // Progress window since the last log line.
  absl::Time window_start_;
  int64_t window_frames_ = 0, window_correct_ = 0;
  double window_loss_ = 0;
  uint64_t window_staleness_ = 0;
};

}  // namespace asgd

#endif  // ASGD_WORKER_TRAINER_H_
