// Trainer: a worker's training loop through the parameter-server pool.
//
// Modes (TrainMode):
//  * kAsgd: asynchronous SGD. Each step pulls the model (after each
//    completed push), draws a minibatch, computes its gradient and adds it
//    to an accumulator; every push_every minibatches the accumulated average
//    is pushed with the versions it was computed from (the server scales the
//    step for the number of minibatches). With compute_while_pushing
//    (SPEECH3: "if the PS is busy, compute another minibatch"), a push runs
//    in the background and the worker keeps computing minibatches on its
//    current model while it is on the wire; they go out together in the next
//    push (at most max_minibatches_per_push of them; then it waits). A push
//    the server drops as too stale, or refuses as busy, is followed by a
//    fresh pull. With overlap_pulls, that pull runs in the background too
//    (ModelPrefetcher, double buffering): it starts when the push completes
//    and the worker keeps computing on the model it holds; the pulled model
//    replaces it between two minibatches, once it has landed. The worker
//    then never waits for a pull, except at the start, at the end, after a
//    failed pull (it retries as below), after a push dropped as too stale
//    (it waits for a model pulled after the drop), and when it has computed
//    max_overlapped_steps minibatches on one model while the next was on
//    the wire (a worker faster than a pull). Each gradient is still
//    pushed with the versions of the model it was computed from, so the
//    servers measure its staleness exactly; the model a gradient is computed
//    on is then typically one push older than with a pull after every push
//    (the one that was on the wire while it was computed).
//  * kSync: the synchronous baseline: pull, compute, push, and the server
//    (started with --sync_workers) applies the average of every worker's
//    gradient once per version. Every worker must run the same number of
//    steps (max_steps).
//  * kSgd: single-worker SGD baseline: plain SGD on a local copy of the
//    model (w -= lr * g) with no communication, then the model is handed to
//    the servers (an assign push) so it can be evaluated like the others.
//
// Data: this worker's own examples in a seeded random order each epoch, or
// with use_pool minibatch ids from the shared pool on server 0, where a slow
// worker simply takes fewer batches, or (open_source) minibatches streamed
// from data that is not held in memory. Any model kind: the examples come from
// worker/data (frames or chunks) and the math from a ModelBackend. The loop
// ends after max_steps steps, or when the data's epochs are used up.
//
// Warm start: with warm_start_epochs > 0, worker 0 first trains plain SGD
// locally for that many epochs of its data and assigns the result to the
// servers; the other workers wait for that model before they start.
//
// Progress and held-out evaluations are logged by the shared scaffold
// (worker/loop/loop.h), the progress line ending in "max-staleness <s>".
//
// A minibatch whose loss or gradient is NaN or Inf stops the run before its
// gradient joins a push or the local model (CheckStepFinite: an error that
// names the step, the epoch and the data, IsNonFiniteStep); the servers
// never see it. Pushes of earlier minibatches stand.
//
// Structure: one loop (per step: prepare the model, draw a minibatch,
// compute and check its gradient, hand the gradient on, book, log,
// evaluate) with a step policy: through the pool, the push pipeline
// (worker/ps/push_pipeline.h) and the model feed (worker/ps/model_feed.h);
// local SGD (kSgd, the warm start) applies the gradient to the local model.
// Every retry goes through one RetryPolicy (worker/ps/retry_policy.h).
//
// Thread-safety: one Trainer per thread. While Run() executes it uses its
// ParamClient (from up to two threads, as ParamClient allows) and backend.
#ifndef ASGD_WORKER_PS_TRAINER_H_
#define ASGD_WORKER_PS_TRAINER_H_

#include <cstdint>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "model/backend.h"
#include "worker/data/batch_source.h"
#include "worker/data/examples.h"
#include "worker/loop/loop.h"
#include "worker/ps/param_client.h"
#include "worker/ps/retry_policy.h"  // JitterSeed

namespace asgd {

class MirroredBuffers;  // worker/ps/mirrored_pull_sink.h

enum class TrainMode { kAsgd, kSync, kSgd };

absl::StatusOr<TrainMode> ParseTrainMode(absl::string_view text);

struct TrainerOptions {
  LoopOptions loop;
  TrainMode mode = TrainMode::kAsgd;
  int push_every = 1;  // minibatches per push (kAsgd)
  bool compute_while_pushing = false;
  // With compute_while_pushing, at most this many minibatches go into one
  // push (at least push_every): past it the worker waits for the wire.
  // Bounds the step the server takes (it scales with the count).
  int max_minibatches_per_push = 4;
  // kAsgd: pull the next model in the background while minibatches compute
  // (see above).
  bool overlap_pulls = false;
  // With overlap_pulls: the most minibatches computed on one model while a
  // newer one is on the wire; then the worker waits for it. A worker whose
  // compute is slower than a pull never gets there; a faster one would
  // otherwise push any number of gradients of one old model (this bounds
  // the staleness the overlap adds, and the pushes per pull). 1: the next
  // model is pulled while one minibatch computes; with 4, three pool
  // workers of a small DNN on a fast loopback saw staleness of 7-14
  // versions and diverged at learning rate 0.05.
  int max_overlapped_steps = 1;
  // kAsgd, kSync: the backend holds the model and sums the gradients (its
  // resident model, model/backend.h): each pulled model is loaded onto it
  // once, each minibatch's gradient stays there, and a push takes their
  // average, or with 1-bit pushes their encoding with the error feedback
  // kept on the backend (worker/ps/resident_push.h). With a CUDA backend
  // nothing model-sized crosses PCIe per minibatch. The same pushes, bit
  // for bit, as without it on the CPU backend
  // (tests/resident_trainer_test.cc).
  bool resident_model = false;
  bool use_pool = false;
  uint64_t pool_seed = 1;  // example order of pool epochs (same on all workers)
  // With use_pool: the run's secret (common/pool_run_id.h), the same on
  // every worker of the run and known to no one else; required (a pool
  // without one is refused at start). A pool with no room for the run's
  // dataset now (RESOURCE_EXHAUSTED: other datasets in use, or this address
  // already uses its share) is asked again with the backoff below, for up
  // to max_retry_time, like a server that is away.
  std::string pool_run_id;
  // This worker's own minibatches (not the pool's) are drawn this many
  // ahead on a thread of their own (worker/data/prefetch_source.h), so that
  // preparing one overlaps the computation of the one before; the same
  // minibatches in the same order; with a backend that stages minibatches
  // (ModelBackend::stages_batches: the CUDA backend), each is also handed
  // to it one step ahead (worker/data/look_ahead_source.h) and uploaded
  // while the one before computes. 0: drawn when needed, nothing staged.
  int prefetch_batches = 0;
  // When set (not with use_pool), the main loop's and the warm start's
  // minibatches come from sources it opens (e.g. a StreamSource over a
  // Kaldi data directory) instead of a LocalSource over `train`, which then
  // only gives the examples' shape (input_dim, steps) and may be empty.
  OpenBatchSource open_source;
  double warm_start_epochs = 0;
  absl::Duration warm_start_timeout = absl::Minutes(30);
  // Learning rate of local SGD (kSgd, warm start); 0: the pool's
  // "learning_rate" attribute.
  float local_learning_rate = 0;
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

class Trainer {
 public:
  // `heldout` may be null. The backend's model must be the pool's, and its
  // max_rows() must hold a minibatch of `train` (ShapeOfBatch). All pointers
  // must outlive the trainer.
  Trainer(ParamClient* client, ModelBackend* backend, const ExampleSet* train,
          const ExampleSet* heldout, const TrainerOptions& options,
          std::ostream* log);

  absl::StatusOr<TrainResult> Run();

 private:
  // One training loop, two step policies (trainer.cc): PoolStep (the
  // push pipeline and the model feed: kAsgd, kSync) and LocalSgdStep
  // (plain SGD on the local model: kSgd, warm start).
  class StepPolicy;
  class PoolStep;
  class LocalSgdStep;

  absl::Status ValidateSetup() const;
  // Steps on result->params with the minibatches of `source` until the
  // data ends, max_steps steps (if > 0) or the time budget; `phase` names
  // the steps in messages.
  absl::Status TrainLoop(StepPolicy* policy, BatchSource* source,
                         int64_t max_steps, absl::string_view phase,
                         TrainResult* result);
  // The trainer's one pull: the whole model, with retries (through its
  // sink in `mirrors`, when given: mirrored_pull_sink.h).
  absl::Status PullWithRetry(absl::Span<float> params,
                             std::vector<uint64_t>* versions,
                             MirroredBuffers* mirrors = nullptr);
  // The trainer's one push (not retried: a server that got it may have
  // applied it).
  absl::StatusOr<PushOutcome> Push(absl::Span<const float> values,
                                   const std::vector<uint64_t>& versions,
                                   int num_minibatches, PushKind kind);
  // The next batch ids of this run's pool dataset, with retries (see
  // TrainerOptions::pool_run_id).
  absl::StatusOr<PoolGrant> FetchWithRetry(uint64_t num_frames, int batch_size,
                                           double epochs, int count);
  // Plain SGD on result->params over `source` (at most max_steps steps if
  // > 0), no communication; `phase` names it in messages.
  absl::Status LocalSgd(BatchSource* source, int64_t max_steps,
                        absl::string_view phase, TrainResult* result);
  absl::Status WarmStart(TrainResult* result, std::vector<uint64_t>* versions);
  // The main loop's minibatches: the shared pool's, or this worker's own
  // (trainer_sources.cc, as the two below).
  absl::StatusOr<std::unique_ptr<BatchSource>> OpenTrainingSource();
  // The minibatches of this worker's own data (open_source, or a
  // LocalSource over train_).
  absl::StatusOr<std::unique_ptr<BatchSource>> OpenSource(uint64_t seed,
                                                          double epochs) const;
  // Idles (slowdown - 1) × `compute` when the worker is a straggler.
  void Straggle(absl::Duration compute);
  // The held-out evaluation of the freshest model the pool has.
  absl::Status FinalEvaluation(TrainResult* result,
                               std::vector<uint64_t>* versions);

  ParamClient* const client_;
  ModelBackend* const backend_;
  const ExampleSet* const train_;
  const ExampleSet* const heldout_;
  const TrainerOptions options_;
  std::ostream* const log_;
  LoopReporter reporter_;
  Clock* const clock_;
  RetryPolicy retry_;
};

}  // namespace asgd

#endif  // ASGD_WORKER_PS_TRAINER_H_
