#include "worker/ps/trainer.h"

#include <algorithm>
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/pool_run_id.h"
#include "common/refusal.h"
#include "common/status_macros.h"
#include "worker/data/make_examples.h"
#include "worker/ps/mirrored_pull_sink.h"
#include "worker/ps/model_feed.h"
#include "worker/ps/push_pipeline.h"
#include "worker/ps/resident_push.h"

namespace asgd {
namespace {

constexpr char kPullRecovered[] =
    "the pool answers again; resuming from a fresh pull";

RetryOptions RetryOptionsOf(const TrainerOptions& options) {
  RetryOptions retry;
  retry.initial_backoff = options.initial_backoff;
  retry.max_backoff = options.max_backoff;
  retry.max_retry_time = options.max_retry_time;
  retry.jitter_seed = options.jitter_seed;
  return retry;
}

// Times the phases of a step: each Lap() reads the clock once and returns
// the time since the previous reading.
class Stopwatch {
 public:
  explicit Stopwatch(Clock* clock) : clock_(clock), last_(clock->Now()) {}
  absl::Duration Lap() {
    const absl::Time now = clock_->Now();
    const absl::Duration lap = now - last_;
    last_ = now;
    return lap;
  }

 private:
  Clock* const clock_;
  absl::Time last_;
};

}  // namespace

absl::StatusOr<TrainMode> ParseTrainMode(absl::string_view text) {
  if (text == "asgd") return TrainMode::kAsgd;
  if (text == "sync") return TrainMode::kSync;
  if (text == "sgd") return TrainMode::kSgd;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown mode '", text,
                   "' (asgd_worker's modes: asgd, sync, sgd; adpsgd, "
                   "allreduce; easgd, admm)"));
}

// What one step of the loop does around drawing a minibatch and computing
// its gradient on result->params: Prepare() before (bring the model up to
// date), Consume() after (where the gradient goes), each timing its phases
// on the step's stopwatch.
class Trainer::StepPolicy {
 public:
  virtual ~StepPolicy() = default;
  virtual absl::Status Prepare(Stopwatch* watch, PhaseTimes* step,
                               TrainResult* result) = 0;
  // The minibatch's gradient at result->params, into `grad` (host memory);
  // a policy whose backend sums the gradients itself (the resident model)
  // leaves `grad` alone.
  virtual absl::StatusOr<BatchResult> Compute(ModelBackend* backend,
                                              const Batch& batch,
                                              TrainResult* result,
                                              absl::Span<float> grad) {
    return backend->ComputeGradient(result->params, batch, grad);
  }
  // Whether Compute leaves the gradient in `grad`.
  virtual bool HostGradient() const { return true; }
  virtual absl::Status Consume(absl::Span<const float> grad, Stopwatch* watch,
                               PhaseTimes* step, TrainResult* result) = 0;
  // Makes result->params hold the model in host memory before the host
  // reads it (an evaluation): a policy whose pulled models may stay where
  // the backend computes (mirrored, not downloaded) downloads them.
  virtual absl::Status HostModel(TrainResult*) { return absl::OkStatus(); }
  // Appended to a progress line.
  virtual std::string ProgressNote() { return ""; }
  // The version a periodic evaluation reports.
  virtual uint64_t version() const { return 0; }
};

// Plain SGD on the local model (w -= lr * g), no communication.
class Trainer::LocalSgdStep final : public StepPolicy {
 public:
  explicit LocalSgdStep(float lr) : lr_(lr) {}
  absl::Status Prepare(Stopwatch*, PhaseTimes*, TrainResult*) override {
    return absl::OkStatus();
  }
  absl::Status Consume(absl::Span<const float> grad, Stopwatch* watch,
                       PhaseTimes* step, TrainResult* result) override {
    std::vector<float>& w = result->params;
    for (size_t i = 0; i < grad.size(); ++i) w[i] -= lr_ * grad[i];
    step->compute = absl::ToDoubleSeconds(watch->Lap());
    return absl::OkStatus();
  }

 private:
  const float lr_;
};

// Through the pool (kAsgd, kSync): the push pipeline takes the gradients,
// the model feed brings newer models after each push.
class Trainer::PoolStep final : public StepPolicy {
 public:
  PoolStep(Trainer* trainer, std::vector<uint64_t>* versions)
      : t_(trainer),
        versions_(versions),
        mirrors_(t_->options_.resident_model &&
                         t_->client_->delta_pull_stats().copies_elsewhere
                     ? std::make_unique<MirroredBuffers>(t_->backend_)
                     : nullptr),
        feed_(FeedOptions(*t_, this), t_->client_, &t_->retry_,
              [this](std::vector<float>* params,
                     std::vector<uint64_t>* versions) {
                return t_->PullWithRetry(absl::MakeSpan(*params), versions,
                                         mirrors_.get());
              }),
        resident_(t_->options_.resident_model
                      ? std::make_unique<ResidentPush>(t_->backend_,
                                                       t_->client_)
                      : nullptr),
        pipeline_(MakePipeline()) {}
  ~PoolStep() override { UnpinModelBuffers(); }

  absl::Status Prepare(Stopwatch* watch, PhaseTimes* step,
                       TrainResult* result) override {
    if (pipeline_.Landed()) ASGD_RETURN_IF_ERROR(Settle(result));
    step->push = absl::ToDoubleSeconds(watch->Lap());
    // After each completed push the model is refreshed, even while the next
    // push is already on the wire.
    ASGD_RETURN_IF_ERROR(feed_.Refresh(&result->params, versions_));
    if (resident_ != nullptr && loaded_model_ != feed_.models()) {
      if (loaded_model_ < 0) PinModelBuffers(result->params);
      // A new model (or the first): onto the backend once.
      step->pull = absl::ToDoubleSeconds(watch->Lap());
      if (mirrors_ != nullptr && mirrors_->Mirrored(result->params)) {
        ASGD_RETURN_IF_ERROR(t_->backend_->LoadMirroredModel(result->params));
      } else {
        // Part of it may have come from copies, into the mirror only.
        ASGD_RETURN_IF_ERROR(HostModel(result));
        ASGD_RETURN_IF_ERROR(t_->backend_->LoadModel(result->params));
      }
      loaded_model_ = feed_.models();
      step->load = absl::ToDoubleSeconds(watch->Lap());
      step->pull += step->load;
      return absl::OkStatus();
    }
    step->pull = absl::ToDoubleSeconds(watch->Lap());
    return absl::OkStatus();
  }

  absl::StatusOr<BatchResult> Compute(ModelBackend* backend,
                                      const Batch& batch, TrainResult* result,
                                      absl::Span<float> grad) override {
    if (resident_ == nullptr) {
      return StepPolicy::Compute(backend, batch, result, grad);
    }
    return backend->AccumulateGradient(batch);
  }
  bool HostGradient() const override { return resident_ == nullptr; }
  absl::Status HostModel(TrainResult* result) override {
    return mirrors_ != nullptr ? mirrors_->Download(result->params)
                               : absl::OkStatus();
  }

  absl::Status Consume(absl::Span<const float> grad, Stopwatch* watch,
                       PhaseTimes* step, TrainResult* result) override {
    const absl::Duration compute = watch->Lap();
    step->compute = absl::ToDoubleSeconds(compute);
    feed_.Computed();
    t_->Straggle(compute);
    step->idle = absl::ToDoubleSeconds(watch->Lap());
    if (resident_ != nullptr) {
      pipeline_.Count(*versions_);
    } else {
      pipeline_.Add(grad, *versions_);
    }
    if (pipeline_.Due()) {
      ASGD_RETURN_IF_ERROR(Settle(result));
      ASGD_RETURN_IF_ERROR(StartPush(result));
    }
    step->push += absl::ToDoubleSeconds(watch->Lap());
    return absl::OkStatus();
  }

  std::string ProgressNote() override {
    std::string note = absl::StrCat(" max-staleness ", window_staleness_);
    window_staleness_ = 0;
    return note;
  }
  uint64_t version() const override {
    return versions_->empty() ? 0 : (*versions_)[0];
  }

  // After the loop: the background push, then whatever is still
  // accumulated (the background pulls stop first: the final pull is the
  // last word).
  absl::Status Flush(TrainResult* result) {
    ASGD_RETURN_IF_ERROR(Settle(result));
    UnpinModelBuffers();  // before the prefetcher's buffer goes
    feed_.StopPrefetching();
    if (pipeline_.pending() > 0 && t_->options_.mode == TrainMode::kAsgd) {
      ASGD_RETURN_IF_ERROR(StartPush(result));
      ASGD_RETURN_IF_ERROR(Settle(result));
    }
    return absl::OkStatus();
  }

 private:
  static ModelFeedOptions FeedOptions(const Trainer& t, PoolStep* step) {
    ModelFeedOptions o;
    o.size = t.client_->layout().total_size();
    o.overlap_pulls =
        t.options_.overlap_pulls && t.options_.mode == TrainMode::kAsgd;
    o.max_overlapped_steps = t.options_.max_overlapped_steps;
    o.prefetch_pull = [step](absl::Span<float> buffer,
                             std::vector<uint64_t>* versions) {
      return PullInto(step->t_->client_, step->mirrors_.get(), buffer,
                      versions);
    };
    return o;
  }
  static PushPipelineOptions PipelineOptions(const Trainer& t) {
    PushPipelineOptions o;
    o.push_every = t.options_.push_every;
    o.background = t.options_.compute_while_pushing;
    o.max_minibatches =
        std::max(t.options_.push_every, t.options_.max_minibatches_per_push);
    if (const int limit = t.client_->max_push_minibatches(); limit > 0) {
      o.max_minibatches = std::min(o.max_minibatches, limit);
    }
    return o;
  }

  // A resident model is loaded from the two model buffers (the held model
  // and the prefetcher's, swapped as models arrive) after every pull: the
  // backend pins them so that a load needs no staging copy. A buffer it
  // cannot pin is loaded through staging, as before.
  void PinModelBuffers(const std::vector<float>& front) {
    for (absl::Span<const float> b :
         {absl::MakeConstSpan(front), feed_.second_buffer()}) {
      if (b.empty()) continue;
      if (absl::Status s = t_->backend_->PinHostBuffer(b); !s.ok()) {
        if (t_->log_ != nullptr) {
          *t_->log_ << "worker " << t_->options_.loop.worker_index
                    << ": model buffer not pinned (" << s.message()
                    << "); models are loaded through staging" << std::endl;
        }
        continue;
      }
      pinned_.push_back(b);
    }
  }
  void UnpinModelBuffers() {
    for (absl::Span<const float> b : pinned_) t_->backend_->UnpinHostBuffer(b);
    pinned_.clear();
  }

  // Host gradients are summed by the pipeline; a resident model's on the
  // backend, taken at each push (ResidentPush).
  PushPipeline MakePipeline() {
    auto completed = [this](absl::StatusOr<PushOutcome> outcome) {
      feed_.PushCompleted();
      return outcome;
    };
    if (resident_ != nullptr) {
      return PushPipeline(
          PipelineOptions(*t_), [this](int n) { return resident_->Take(n); },
          [this, completed](absl::Span<const float>,
                            const std::vector<uint64_t>& base, int n) {
            return completed(resident_->Send(base, n));
          });
    }
    return PushPipeline(
        t_->client_->layout().total_size(), PipelineOptions(*t_),
        [this, completed](absl::Span<const float> average,
                          const std::vector<uint64_t>& base, int n) {
          return completed(t_->Push(average, base, n, PushKind::kGradient));
        });
  }

  absl::Status StartPush(TrainResult* result) {
    ASGD_RETURN_IF_ERROR(pipeline_.Start());
    if (t_->options_.compute_while_pushing) return absl::OkStatus();
    return Settle(result);
  }

  // Waits for the push on the wire (if any) and books its outcome.
  absl::Status Settle(TrainResult* result) {
    std::optional<absl::StatusOr<PushOutcome>> outcome = pipeline_.Collect();
    if (!outcome.has_value()) return absl::OkStatus();
    if (resident_ != nullptr) ASGD_RETURN_IF_ERROR(resident_->Restore());
    if (!outcome->ok()) {
      if (RefusalOf(outcome->status()) != Refusal::kNone) {
        // A server was overloaded (queues full, push memory in use, too
        // many pushes from here). Other servers may have applied their
        // part, so the gradient is not resent: pull and go on.
        ++result->pushes_busy;
      } else {
        // Lost with a server that went away (or refused by one that came
        // back without it): not resent; pull fresh and go on.
        ASGD_RETURN_IF_ERROR(t_->retry_.BackOff(outcome->status(), "push"));
      }
      feed_.PushLost();
      return absl::OkStatus();
    }
    t_->retry_.Succeeded();
    if (TrainerObserver* observer = t_->options_.loop.observer) {
      observer->OnPush(
          PushReport{(*outcome)->max_staleness, (*outcome)->dropped});
    }
    ++result->pushes;
    result->pushes_dropped += (*outcome)->dropped;
    window_staleness_ = std::max(window_staleness_, (*outcome)->max_staleness);
    feed_.PushSettled((*outcome)->pull_required);
    return absl::OkStatus();
  }

  Trainer* const t_;
  std::vector<uint64_t>* const versions_;
  uint64_t window_staleness_ = 0;
  // With the client's exact copies on the backend (--replay_on_device) and
  // a resident model: the model buffers' sinks, so that a model pulled all
  // from copies loads from the backend's mirror (before feed_: it pulls
  // through them).
  std::unique_ptr<MirroredBuffers> mirrors_;
  ModelFeed feed_;
  std::unique_ptr<ResidentPush> resident_;  // with options_.resident_model
  int64_t loaded_model_ = -1;  // feed_.models() when the backend loaded it
  std::vector<absl::Span<const float>> pinned_;  // by PinModelBuffers
  // Last: its push may use feed_ and resident_ until it is gone.
  PushPipeline pipeline_;
};

Trainer::Trainer(ParamClient* client, ModelBackend* backend,
                 const ExampleSet* train, const ExampleSet* heldout,
                 const TrainerOptions& options, std::ostream* log)
    : client_(client),
      backend_(backend),
      train_(train),
      heldout_(heldout),
      options_(options),
      log_(log),
      reporter_(options.loop, backend, heldout, log),
      clock_(reporter_.clock()),
      retry_(RetryOptionsOf(options), options.loop.worker_index,
             options.loop.observer, clock_, log) {}

absl::Status Trainer::ValidateSetup() const {
  const LoopOptions& loop = options_.loop;
  if (options_.open_source && options_.use_pool) {
    return absl::InvalidArgumentError(
        "the shared minibatch pool needs every example in memory, not a "
        "streamed source");
  }
  if (options_.use_pool) {
    ASGD_RETURN_IF_ERROR(ValidatePoolRunId(options_.pool_run_id));
  }
  ASGD_RETURN_IF_ERROR(CheckLoopSetup(loop, *backend_, *train_,
                                      client_->layout().total_size(),
                                      options_.open_source != nullptr));
  if (options_.push_every < 1) {
    return absl::InvalidArgumentError("push_every must be >= 1");
  }
  if (options_.overlap_pulls && options_.max_overlapped_steps < 1) {
    return absl::InvalidArgumentError("max_overlapped_steps must be >= 1");
  }
  if (const int limit = client_->max_push_minibatches();
      limit > 0 && options_.push_every > limit) {
    return absl::InvalidArgumentError(
        absl::StrCat("--push_every=", options_.push_every,
                     " is more minibatches per push than the servers accept (",
                     limit, "; asgd_server --max_push_minibatches)"));
  }
  if (options_.prefetch_batches < 0 || options_.prefetch_batches > 16) {
    return absl::InvalidArgumentError(
        absl::StrCat("--prefetch_batches=", options_.prefetch_batches,
                     " is outside [0, 16]"));
  }
  if (options_.use_pool && ShapeOfBatch(*train_, loop.batch_size).examples >
                               train_->num_examples()) {
    return absl::InvalidArgumentError("batch larger than the training data");
  }
  if (options_.mode == TrainMode::kSync &&
      (loop.max_steps <= 0 || loop.max_seconds > 0 || options_.use_pool ||
       options_.push_every != 1 || options_.compute_while_pushing ||
       options_.overlap_pulls)) {
    return absl::InvalidArgumentError(
        "synchronous mode needs a step count (equal on every worker, no time "
        "budget), one minibatch per push, no background pushes or pulls and "
        "no minibatch pool");
  }
  return absl::OkStatus();
}

void Trainer::Straggle(absl::Duration compute) {
  if (options_.loop.slowdown > 1.0) {
    clock_->SleepFor(compute * (options_.loop.slowdown - 1.0));
  }
}

absl::Status Trainer::TrainLoop(StepPolicy* policy, BatchSource* source,
                                int64_t max_steps, absl::string_view phase,
                                TrainResult* result) {
  const LoopOptions& loop = options_.loop;
  const BatchShape shape = ShapeOfBatch(*train_, loop.batch_size);
  BatchBuffer batch(shape.examples, shape.steps, train_->input_dim(),
                    train_->labels_per_row());
  std::vector<float> grad(policy->HostGradient() ? result->params.size() : 0);
  for (;;) {
    if (max_steps > 0 && result->steps >= max_steps) break;
    if (loop.max_seconds > 0 && reporter_.Seconds() >= loop.max_seconds) break;
    Stopwatch watch(clock_);
    PhaseTimes step;
    ASGD_RETURN_IF_ERROR(policy->Prepare(&watch, &step, result));
    ASGD_ASSIGN_OR_RETURN(bool more, source->Next(&batch));
    if (!more) break;
    step.data = absl::ToDoubleSeconds(watch.Lap());
    ASGD_ASSIGN_OR_RETURN(BatchResult r,
                          policy->Compute(backend_, batch.view(), result,
                                          absl::MakeSpan(grad)));
    // Before the gradient goes anywhere (a push, the local model).
    ASGD_RETURN_IF_ERROR(CheckStepFinite(
        r, policy->HostGradient() ? absl::MakeConstSpan(grad)
                                  : absl::Span<const float>(),
        batch.view(), loop, result->steps + 1, source->epochs(), phase));
    ASGD_RETURN_IF_ERROR(policy->Consume(grad, &watch, &step, result));
    reporter_.BookStep(r, LabelledFrames(batch.view()), step, result);
    if (loop.log_every > 0 && result->steps % loop.log_every == 0) {
      reporter_.MaybeLog(*result, source->epochs(), policy->ProgressNote());
    }
    if (reporter_.EvalDue(result->steps)) {
      ASGD_RETURN_IF_ERROR(policy->HostModel(result));
      ASGD_RETURN_IF_ERROR(
          reporter_.Evaluate(result->params, policy->version(), false, result));
    }
  }
  return absl::OkStatus();
}

absl::Status Trainer::LocalSgd(BatchSource* source, int64_t max_steps,
                               absl::string_view phase, TrainResult* result) {
  ASGD_ASSIGN_OR_RETURN(float lr,
                        LocalLearningRate(options_.local_learning_rate,
                                          client_->attributes()));
  LocalSgdStep step(lr);
  return TrainLoop(&step, source, max_steps, phase, result);
}

absl::Status Trainer::WarmStart(TrainResult* result,
                                std::vector<uint64_t>* versions) {
  if (options_.loop.worker_index == 0) {
    ASGD_ASSIGN_OR_RETURN(float lr,
                          LocalLearningRate(options_.local_learning_rate,
                                            client_->attributes()));
    ASGD_ASSIGN_OR_RETURN(
        std::unique_ptr<BatchSource> source,
        OpenSource(options_.loop.seed * 104729 + 17, options_.warm_start_epochs));
    if (log_ != nullptr) {
      *log_ << absl::StrFormat(
                   "worker 0 warm start: %.2f epochs of plain SGD (lr %g)",
                   options_.warm_start_epochs, lr)
            << std::endl;
    }
    TrainResult warm;
    warm.params = std::move(result->params);
    ASGD_RETURN_IF_ERROR(
        LocalSgd(source.get(), /*max_steps=*/0, "warm-start", &warm));
    result->params = std::move(warm.params);
    ASGD_RETURN_IF_ERROR(
        Push(result->params, *versions, 1, PushKind::kAssign).status());
    if (log_ != nullptr) {
      *log_ << "worker 0 warm start done after " << warm.steps
            << " steps; model handed to the servers" << std::endl;
    }
    return PullWithRetry(absl::MakeSpan(result->params), versions);
  }
  // Other workers wait for worker 0's model (every server past version 0).
  const absl::Time deadline = clock_->Now() + options_.warm_start_timeout;
  for (;;) {
    ASGD_ASSIGN_OR_RETURN(std::vector<uint64_t> now, client_->Versions());
    if (std::all_of(now.begin(), now.end(), [](uint64_t v) { return v > 0; })) {
      break;
    }
    if (clock_->Now() > deadline) {
      return absl::DeadlineExceededError(
          "timed out waiting for worker 0's warm-start model");
    }
    clock_->SleepFor(absl::Milliseconds(100));  // polling a remote condition
  }
  return PullWithRetry(absl::MakeSpan(result->params), versions);
}

absl::Status Trainer::PullWithRetry(absl::Span<float> params,
                                    std::vector<uint64_t>* versions,
                                    MirroredBuffers* mirrors) {
  return retry_.Retry(
      [&] { return PullInto(client_, mirrors, params, versions); }, "pull",
      kPullRecovered);
}

absl::StatusOr<PushOutcome> Trainer::Push(absl::Span<const float> values,
                                          const std::vector<uint64_t>& versions,
                                          int num_minibatches, PushKind kind) {
  return client_->Push(values, versions, num_minibatches, kind);
}

absl::Status Trainer::FinalEvaluation(TrainResult* result,
                                      std::vector<uint64_t>* versions) {
  ASGD_RETURN_IF_ERROR(PullWithRetry(absl::MakeSpan(result->params), versions));
  result->seconds = reporter_.Seconds();
  if (heldout_ != nullptr && heldout_->num_examples() > 0) {
    ASGD_RETURN_IF_ERROR(reporter_.Evaluate(
        result->params, versions->empty() ? 0 : (*versions)[0], true, result));
    result->heldout_accuracy = result->evals.back().accuracy;
  }
  return absl::OkStatus();
}

absl::StatusOr<TrainResult> Trainer::Run() {
  ASGD_RETURN_IF_ERROR(ValidateSetup());
  TrainResult result;
  result.params.resize(client_->layout().total_size());
  std::vector<uint64_t> versions;
  ASGD_RETURN_IF_ERROR(PullWithRetry(absl::MakeSpan(result.params), &versions));
  if (options_.warm_start_epochs > 0) {
    ASGD_RETURN_IF_ERROR(WarmStart(&result, &versions));
  }
  ASGD_ASSIGN_OR_RETURN(std::unique_ptr<BatchSource> source,
                        OpenTrainingSource());
  const int64_t max_steps = options_.loop.max_steps;
  if (options_.mode == TrainMode::kSgd) {
    ASGD_RETURN_IF_ERROR(
        LocalSgd(source.get(), max_steps, "training", &result));
    reporter_.MaybeLog(result, source->epochs(), "", /*force=*/true);
    // Hand the model to the servers so it is evaluated like the others.
    ASGD_RETURN_IF_ERROR(
        Push(result.params, versions, 1, PushKind::kAssign).status());
  } else {
    PoolStep step(this, &versions);
    ASGD_RETURN_IF_ERROR(
        TrainLoop(&step, source.get(), max_steps, "training", &result));
    const absl::Time flush_start = clock_->Now();
    ASGD_RETURN_IF_ERROR(step.Flush(&result));
    result.phases.push += absl::ToDoubleSeconds(clock_->Now() - flush_start);
    reporter_.MaybeLog(result, source->epochs(), step.ProgressNote(),
                       /*force=*/true);
  }
  // Evaluate the freshest model the pool has.
  ASGD_RETURN_IF_ERROR(FinalEvaluation(&result, &versions));
  return result;
}

}  // namespace asgd
