#include "worker/ps/trainer.h"

#include <unistd.h>

#include <algorithm>
#include <future>
#include <memory>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/pool_run_id.h"
#include "common/refusal.h"
#include "common/status_macros.h"
#include "worker/data/make_examples.h"
#include "worker/ps/pool_source.h"

namespace asgd {

absl::StatusOr<TrainMode> ParseTrainMode(absl::string_view text) {
  if (text == "asgd") return TrainMode::kAsgd;
  if (text == "sync") return TrainMode::kSync;
  if (text == "sgd") return TrainMode::kSgd;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown mode '", text, "' (want asgd, sync or sgd)"));
}

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
      jitter_state_(options.jitter_seed != 0
                        ? options.jitter_seed
                        : JitterSeed(options.loop.worker_index)) {}

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

absl::StatusOr<std::unique_ptr<BatchSource>> Trainer::OpenSource(
    uint64_t seed, double epochs) const {
  if (options_.open_source) return options_.open_source(seed, epochs);
  return std::unique_ptr<BatchSource>(
      std::make_unique<LocalSource>(train_, seed, epochs));
}

void Trainer::Straggle(absl::Duration compute) {
  if (options_.loop.slowdown > 1.0) {
    clock_->SleepFor(compute * (options_.loop.slowdown - 1.0));
  }
}

absl::Status Trainer::LocalSgd(BatchSource* source, float lr, int64_t max_steps,
                               absl::string_view phase, TrainResult* result) {
  const BatchShape shape = ShapeOfBatch(*train_, options_.loop.batch_size);
  BatchBuffer batch(shape.examples, shape.steps, train_->input_dim());
  std::vector<float> grad(result->params.size());
  for (;;) {
    if (max_steps > 0 && result->steps >= max_steps) break;
    if (options_.loop.max_seconds > 0 &&
        reporter_.Seconds() >= options_.loop.max_seconds) {
      break;
    }
    const absl::Time t0 = clock_->Now();
    ASGD_ASSIGN_OR_RETURN(bool more, source->Next(&batch));
    if (!more) break;
    const absl::Time t1 = clock_->Now();
    ASGD_ASSIGN_OR_RETURN(
        BatchResult r, backend_->ComputeGradient(result->params, batch.view(),
                                                 absl::MakeSpan(grad)));
    // The local model is handed to the servers later: nothing non-finite
    // goes into it.
    ASGD_RETURN_IF_ERROR(CheckStepFinite(r, grad, batch.view(), options_.loop,
                                         result->steps + 1, source->epochs(),
                                         phase));
    for (size_t i = 0; i < grad.size(); ++i) result->params[i] -= lr * grad[i];
    const absl::Time t2 = clock_->Now();
    PhaseTimes step;
    step.data = absl::ToDoubleSeconds(t1 - t0);
    step.compute = absl::ToDoubleSeconds(t2 - t1);
    reporter_.BookStep(r, step, result);
    reporter_.MaybeLog(*result, source->epochs(), "");
    if (reporter_.EvalDue(result->steps)) {
      ASGD_RETURN_IF_ERROR(reporter_.Evaluate(result->params, 0, false, result));
    }
  }
  return absl::OkStatus();
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
        LocalSgd(source.get(), lr, /*max_steps=*/0, "warm-start", &warm));
    result->params = std::move(warm.params);
    ASGD_RETURN_IF_ERROR(
        client_->Push(result->params, *versions, 1, PushKind::kAssign)
            .status());
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

namespace {

// Errors a restarting or briefly unreachable pool produces, by code alone.
// ABORTED is a push computed from versions a restored server never reached:
// pull again.
bool Transient(const absl::Status& s) {
  switch (s.code()) {
    case absl::StatusCode::kUnavailable:
    case absl::StatusCode::kDeadlineExceeded:
    case absl::StatusCode::kAborted:
    case absl::StatusCode::kCancelled:
      return true;
    default:
      return false;
  }
}

uint64_t SplitMix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

}  // namespace

uint64_t JitterSeed(int worker_index) {
  return SplitMix64(SplitMix64(static_cast<uint64_t>(worker_index)) ^
                    SplitMix64(static_cast<uint64_t>(getpid())) ^
                    static_cast<uint64_t>(absl::ToUnixNanos(absl::Now())));
}

absl::Status Trainer::BackOff(const absl::Status& error, absl::string_view what,
                              bool pool_full) {
  const bool retry =
      Transient(error) ||
      (pool_full && error.code() == absl::StatusCode::kResourceExhausted);
  if (!retry) return error;
  const absl::Time now = clock_->Now();
  if (failures_ == 0) first_failure_ = now;
  if (now - first_failure_ > options_.max_retry_time) {
    return absl::Status(error.code(),
                        absl::StrCat(error.message(), " (still failing after ",
                                     absl::FormatDuration(now - first_failure_),
                                     " of retries)"));
  }
  absl::Duration wait = options_.initial_backoff;
  for (int i = 0; i < failures_ && wait < options_.max_backoff; ++i) wait *= 2;
  wait = std::min(wait, options_.max_backoff);
  // Jitter in [0.5, 1], from a per-worker seed: workers that lost the same
  // server do not return in lockstep, and none waits past max_backoff.
  jitter_state_ = jitter_state_ * 6364136223846793005ull + 1442695040888963407ull;
  wait *= 0.5 + 0.5 * static_cast<double>(SplitMix64(jitter_state_) >> 11) *
                    0x1.0p-53;
  ++failures_;
  if (options_.loop.observer != nullptr) options_.loop.observer->OnRpcRetry();
  if (log_ != nullptr) {
    *log_ << "worker " << options_.loop.worker_index << ": " << what
          << " failed (" << error << "); retry " << failures_ << " in "
          << absl::FormatDuration(wait) << std::endl;
  }
  clock_->SleepFor(wait);
  return absl::OkStatus();
}

absl::StatusOr<PoolGrant> Trainer::FetchWithRetry(uint64_t num_frames,
                                                  int batch_size,
                                                  double epochs, int count) {
  for (;;) {
    absl::StatusOr<PoolGrant> grant = client_->FetchBatches(
        options_.pool_run_id, num_frames, batch_size, epochs, count);
    if (grant.ok()) {
      if (failures_ > 0 && log_ != nullptr) {
        *log_ << "worker " << options_.loop.worker_index
              << ": the minibatch pool answered after " << failures_
              << " retries" << std::endl;
      }
      failures_ = 0;
      return grant;
    }
    const absl::Status& error = grant.status();
    if (error.code() == absl::StatusCode::kResourceExhausted &&
        failures_ == 0 && log_ != nullptr) {
      *log_ << "worker " << options_.loop.worker_index
            << ": the minibatch pool on server 0 has no room for this run's "
               "dataset now (other datasets are in use, or this address "
               "already uses its share); asking again for up to "
            << absl::FormatDuration(options_.max_retry_time)
            << ": a dataset unused for a while is forgotten" << std::endl;
    }
    ASGD_RETURN_IF_ERROR(
        BackOff(error, "minibatch pool fetch", /*pool_full=*/true));
  }
}

absl::Status Trainer::PullWithRetry(absl::Span<float> params,
                                    std::vector<uint64_t>* versions) {
  for (;;) {
    absl::Status s = client_->Pull(params, versions);
    if (s.ok()) {
      if (failures_ > 0 && log_ != nullptr) {
        *log_ << "worker " << options_.loop.worker_index
              << ": the pool answers again; resuming from a fresh pull"
              << std::endl;
      }
      failures_ = 0;
      return s;
    }
    ASGD_RETURN_IF_ERROR(BackOff(s, "pull"));
  }
}

absl::StatusOr<bool> Trainer::TakePrefetched(
    ModelPrefetcher* prefetcher, bool wait, std::vector<float>* params,
    std::vector<uint64_t>* versions) {
  for (;;) {
    absl::StatusOr<bool> taken = wait ? prefetcher->Wait(params, versions)
                                      : prefetcher->TakeIfReady(params, versions);
    if (taken.ok()) {
      if (*taken && failures_ > 0) {
        if (log_ != nullptr) {
          *log_ << "worker " << options_.loop.worker_index
                << ": the pool answers again; resuming from a fresh pull"
                << std::endl;
        }
        failures_ = 0;
      }
      return *taken;
    }
    ASGD_RETURN_IF_ERROR(BackOff(taken.status(), "pull"));
    prefetcher->Request();
    wait = true;
  }
}

absl::StatusOr<TrainResult> Trainer::Run() {
  ASGD_RETURN_IF_ERROR(ValidateSetup());
  const LoopOptions& loop = options_.loop;
  const int64_t total = client_->layout().total_size();
  const BatchShape shape = ShapeOfBatch(*train_, loop.batch_size);
  TrainResult result;
  result.params.resize(total);
  std::vector<uint64_t> versions;

  ASGD_RETURN_IF_ERROR(PullWithRetry(absl::MakeSpan(result.params), &versions));
  if (options_.warm_start_epochs > 0) {
    ASGD_RETURN_IF_ERROR(WarmStart(&result, &versions));
  }

  std::unique_ptr<BatchSource> source;
  if (options_.use_pool) {
    source = std::make_unique<PoolSource>(
        [this](uint64_t num_frames, int batch_size, double epochs, int count) {
          return FetchWithRetry(num_frames, batch_size, epochs, count);
        },
        train_, options_.pool_seed, shape.examples, loop.epochs);
  } else {
    ASGD_ASSIGN_OR_RETURN(
        source, OpenSource(loop.seed * 7919 + loop.worker_index, loop.epochs));
  }
  auto staleness = [&] {
    return absl::StrCat(" max-staleness ", window_staleness_);
  };

  if (options_.mode == TrainMode::kSgd) {
    ASGD_ASSIGN_OR_RETURN(float lr,
                          LocalLearningRate(options_.local_learning_rate,
                                            client_->attributes()));
    ASGD_RETURN_IF_ERROR(
        LocalSgd(source.get(), lr, loop.max_steps, "training", &result));
    reporter_.MaybeLog(result, source->epochs(), "", /*force=*/true);
    // Hand the model to the servers so it is evaluated like the others.
    ASGD_RETURN_IF_ERROR(
        client_->Push(result.params, versions, 1, PushKind::kAssign).status());
  } else {
    std::vector<float> grad(total), accum(total, 0.0f), outgoing(total);
    BatchBuffer batch(shape.examples, shape.steps, train_->input_dim());
    int accum_n = 0;
    std::vector<uint64_t> accum_versions;
    std::optional<std::future<absl::StatusOr<PushOutcome>>> in_flight;
    bool need_pull = false;  // the model was pulled just above
    // With overlap_pulls: the background pulls, and whether the last push
    // was dropped as too stale (the next gradient needs a model pulled after
    // the drop).
    std::unique_ptr<ModelPrefetcher> prefetcher;
    if (options_.overlap_pulls && options_.mode == TrainMode::kAsgd) {
      prefetcher = std::make_unique<ModelPrefetcher>(client_, total);
    }
    bool stale_drop = false;
    int steps_on_model = 0;  // minibatches computed on the model held now

    // Waits for the background push (if any) and books its outcome.
    auto collect = [&]() -> absl::Status {
      if (!in_flight.has_value()) return absl::OkStatus();
      absl::StatusOr<PushOutcome> outcome = in_flight->get();
      in_flight.reset();
      if (!outcome.ok() && RefusalOf(outcome.status()) != Refusal::kNone) {
        // A server was overloaded (queues full, push memory in use, too many
        // pushes from here). Other servers may have applied their part, so
        // the gradient is not resent: pull and go on.
        ++result.pushes_busy;
        need_pull = true;
        return absl::OkStatus();
      }
      if (!outcome.ok()) {
        // Lost with a server that went away (or refused by one that came
        // back without it): not resent; pull fresh and go on.
        ASGD_RETURN_IF_ERROR(BackOff(outcome.status(), "push"));
        need_pull = true;
        return absl::OkStatus();
      }
      failures_ = 0;
      if (loop.observer != nullptr) {
        loop.observer->OnPush(
            PushReport{outcome->max_staleness, outcome->dropped});
      }
      ++result.pushes;
      result.pushes_dropped += outcome->dropped;
      window_staleness_ = std::max(window_staleness_, outcome->max_staleness);
      need_pull = true;
      stale_drop = outcome->pull_required;
      return absl::OkStatus();
    };
    auto start_push = [&]() -> absl::Status {
      const float inv = 1.0f / accum_n;
      for (int64_t i = 0; i < total; ++i) {
        outgoing[i] = accum[i] * inv;
        accum[i] = 0.0f;
      }
      const int n = accum_n;
      accum_n = 0;
      const std::vector<uint64_t> base = accum_versions;
      // With overlapped pulls the next model is asked for the moment the
      // push completes, from the thread that pushed.
      auto push = [this, &outgoing, base, n, ahead = prefetcher.get()] {
        absl::StatusOr<PushOutcome> outcome = client_->Push(outgoing, base, n);
        if (ahead != nullptr) ahead->Request();
        return outcome;
      };
      if (options_.compute_while_pushing) {
        in_flight = std::async(std::launch::async, push);
        return absl::OkStatus();
      }
      std::promise<absl::StatusOr<PushOutcome>> done;
      done.set_value(push());
      in_flight = done.get_future();
      return collect();
    };
    auto push_ready = [&] {
      return in_flight.has_value() &&
             in_flight->wait_for(std::chrono::seconds(0)) ==
                 std::future_status::ready;
    };

    for (;;) {
      if (reporter_.Done(result.steps)) break;
      const absl::Time t0 = clock_->Now();
      if (push_ready()) ASGD_RETURN_IF_ERROR(collect());
      const absl::Time t1 = clock_->Now();
      // After each completed push the model is refreshed, even while the
      // next push is already on the wire: at once, or (overlapped) as soon as
      // the background pull has landed.
      if (prefetcher != nullptr) {
        bool taken;
        if (stale_drop) {
          // A model pulled before the drop may be waiting: take it, then
          // wait for the one asked for after it.
          ASGD_ASSIGN_OR_RETURN(taken, TakePrefetched(prefetcher.get(), true,
                                                      &result.params,
                                                      &versions));
          if (prefetcher->pull_in_flight()) {
            ASGD_ASSIGN_OR_RETURN(taken, TakePrefetched(prefetcher.get(), true,
                                                        &result.params,
                                                        &versions));
          }
          stale_drop = false;
        } else {
          // Ahead of the pull on the wire by max_overlapped_steps: wait.
          const bool wait =
              steps_on_model >= options_.max_overlapped_steps &&
              prefetcher->pull_in_flight();
          ASGD_ASSIGN_OR_RETURN(taken, TakePrefetched(prefetcher.get(), wait,
                                                      &result.params,
                                                      &versions));
        }
        if (taken) steps_on_model = 0;
        need_pull = false;
      } else if (need_pull) {
        ASGD_RETURN_IF_ERROR(
            PullWithRetry(absl::MakeSpan(result.params), &versions));
        need_pull = false;
      }
      const absl::Time t2 = clock_->Now();
      ASGD_ASSIGN_OR_RETURN(bool more, source->Next(&batch));
      if (!more) break;
      const absl::Time t3 = clock_->Now();
      ASGD_ASSIGN_OR_RETURN(
          BatchResult r, backend_->ComputeGradient(result.params, batch.view(),
                                                   absl::MakeSpan(grad)));
      // Before the gradient joins anything that is pushed.
      ASGD_RETURN_IF_ERROR(CheckStepFinite(r, grad, batch.view(), loop,
                                           result.steps + 1, source->epochs(),
                                           "training"));
      const absl::Time t4 = clock_->Now();
      ++steps_on_model;
      Straggle(t4 - t3);
      const absl::Time t5 = clock_->Now();
      if (accum_n == 0) accum_versions = versions;  // oldest model in the sum
      for (int64_t i = 0; i < total; ++i) accum[i] += grad[i];
      ++accum_n;

      if (accum_n >= options_.push_every) {
        const bool busy = in_flight.has_value() && !push_ready();
        int cap =
            std::max(options_.push_every, options_.max_minibatches_per_push);
        if (client_->max_push_minibatches() > 0) {
          cap = std::min(cap, client_->max_push_minibatches());
        }
        if (!(busy && options_.compute_while_pushing && accum_n < cap)) {
          ASGD_RETURN_IF_ERROR(collect());
          ASGD_RETURN_IF_ERROR(start_push());
        }
      }
      const absl::Time t6 = clock_->Now();
      PhaseTimes step;
      step.push = absl::ToDoubleSeconds((t1 - t0) + (t6 - t5));
      step.pull = absl::ToDoubleSeconds(t2 - t1);
      step.data = absl::ToDoubleSeconds(t3 - t2);
      step.compute = absl::ToDoubleSeconds(t4 - t3);
      step.idle = absl::ToDoubleSeconds(t5 - t4);
      reporter_.BookStep(r, step, &result);
      if (loop.log_every > 0 && result.steps % loop.log_every == 0) {
        reporter_.MaybeLog(result, source->epochs(), staleness());
        window_staleness_ = 0;
      }
      if (reporter_.EvalDue(result.steps)) {
        ASGD_RETURN_IF_ERROR(reporter_.Evaluate(
            result.params, versions.empty() ? 0 : versions[0], false, &result));
      }
    }
    // Flush: the background push, then whatever is still accumulated (the
    // background pulls stop first: the final pull below is the last word).
    const absl::Time t0 = clock_->Now();
    ASGD_RETURN_IF_ERROR(collect());
    prefetcher.reset();
    if (accum_n > 0 && options_.mode == TrainMode::kAsgd) {
      ASGD_RETURN_IF_ERROR(start_push());
      ASGD_RETURN_IF_ERROR(collect());
    }
    result.phases.push += absl::ToDoubleSeconds(clock_->Now() - t0);
    reporter_.MaybeLog(result, source->epochs(), staleness(), /*force=*/true);
  }
  // Evaluate the freshest model the pool has.
  ASGD_RETURN_IF_ERROR(PullWithRetry(absl::MakeSpan(result.params), &versions));
  result.seconds = reporter_.Seconds();
  if (heldout_ != nullptr && heldout_->num_examples() > 0) {
    ASGD_RETURN_IF_ERROR(reporter_.Evaluate(
        result.params, versions.empty() ? 0 : versions[0], true, &result));
    result.heldout_accuracy = result.evals.back().accuracy;
  }
  return result;
}

}  // namespace asgd
