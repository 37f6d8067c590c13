#include "worker/trainer.h"

#include <unistd.h>

#include <algorithm>
#include <future>
#include <optional>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "common/refusal.h"
#include "common/status_macros.h"

namespace asgd {

absl::StatusOr<TrainMode> ParseTrainMode(absl::string_view text) {
  if (text == "asgd") return TrainMode::kAsgd;
  if (text == "sync") return TrainMode::kSync;
  if (text == "sgd") return TrainMode::kSgd;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown mode '", text, "' (want asgd, sync or sgd)"));
}

absl::StatusOr<double> EvaluateAccuracy(DnnBackend* backend,
                                        absl::Span<const float> params,
                                        const FrameData& data, int batch,
                                        int64_t max_frames) {
  if (data.num_frames() == 0) {
    return absl::FailedPreconditionError("no frames to evaluate");
  }
  const int64_t stride =
      max_frames > 0 ? std::max<int64_t>(1, data.num_frames() / max_frames) : 1;
  const int dim = data.input_dim();
  std::vector<float> inputs(int64_t{batch} * dim);
  std::vector<int32_t> predicted(batch);
  std::vector<int64_t> frames;
  int64_t correct = 0, total = 0;
  for (int64_t f = 0; f < data.num_frames(); f += stride) {
    frames.push_back(f);
    if (static_cast<int>(frames.size()) == batch ||
        f + stride >= data.num_frames()) {
      const int n = static_cast<int>(frames.size());
      for (int i = 0; i < n; ++i) data.Splice(frames[i], inputs.data() + int64_t{i} * dim);
      ASGD_RETURN_IF_ERROR(backend->Predict(
          params, absl::MakeConstSpan(inputs.data(), int64_t{n} * dim),
          absl::MakeSpan(predicted.data(), n)));
      for (int i = 0; i < n; ++i) correct += predicted[i] == data.label(frames[i]);
      total += n;
      frames.clear();
    }
  }
  return static_cast<double>(correct) / total;
}

absl::Status EvaluateAndReport(DnnBackend* backend,
                               absl::Span<const float> params,
                               const FrameData& heldout,
                               const TrainerOptions& options, bool full,
                               EvalPoint point, std::vector<EvalPoint>* evals,
                               std::ostream* log) {
  ASGD_ASSIGN_OR_RETURN(
      point.accuracy,
      EvaluateAccuracy(backend, params, heldout, options.batch_size,
                       full ? 0 : options.eval_frames));
  evals->push_back(point);
  if (options.observer != nullptr) {
    options.observer->OnHeldoutAccuracy(point.accuracy);
  }
  if (log != nullptr) {
    *log << absl::StrFormat(
                "worker %d eval t=%.1f frames=%d version=%d held-out frame "
                "accuracy: %.1f%%",
                options.worker_index, point.seconds, point.frames,
                point.version, 100 * point.accuracy)
         << std::endl;
  }
  return absl::OkStatus();
}

absl::Status CheckModelMatchesCorpus(const DnnSpec& spec,
                                     const corpus::CorpusInfo& info,
                                     int context) {
  const int64_t inputs = int64_t{2 * context + 1} * info.feature_dim;
  if (inputs != spec.input_dim) {
    return absl::FailedPreconditionError(
        absl::StrCat("the corpus gives ", inputs, " inputs per frame (",
                     info.feature_dim, " features, context ", context,
                     ") but the model takes ", spec.input_dim));
  }
  if (info.num_classes != spec.num_classes) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the corpus has ", info.num_classes, " classes but the model has ",
        spec.num_classes, " outputs (start the servers with --num_classes=",
        info.num_classes, ")"));
  }
  return absl::OkStatus();
}

absl::Status CheckModelMatchesLayout(const DnnSpec& spec,
                                     const ModelLayout& layout) {
  const std::vector<TensorSpec> want = DnnTensors(spec);
  bool same = want.size() == layout.tensors().size();
  for (size_t i = 0; same && i < want.size(); ++i) {
    same = want[i].name == layout.tensors()[i].name &&
           want[i].shape == layout.tensors()[i].shape;
  }
  if (!same) {
    return absl::FailedPreconditionError(
        "the pool's model does not have the DNN layout this worker expects");
  }
  return absl::OkStatus();
}

absl::StatusOr<DnnSpec> DnnSpecFromPool(const ParamClient& client) {
  const auto& tensors = client.layout().tensors();
  if (tensors.size() < 2 || tensors.size() % 2 != 0 ||
      tensors[0].shape.size() != 2) {
    return absl::FailedPreconditionError(
        "the pool's model is not a DNN (want layer<i>/weight, layer<i>/bias)");
  }
  DnnSpec spec;
  spec.input_dim = static_cast<int>(tensors[0].shape[1]);
  spec.hidden.clear();
  const int layers = static_cast<int>(tensors.size() / 2);
  for (int l = 0; l + 1 < layers; ++l) {
    spec.hidden.push_back(static_cast<int>(tensors[2 * l].shape[0]));
  }
  spec.num_classes = static_cast<int>(tensors[2 * (layers - 1)].shape[0]);
  auto it = client.attributes().find("activation");
  ASGD_ASSIGN_OR_RETURN(
      spec.activation,
      ParseActivation(it == client.attributes().end() ? "relu" : it->second));
  ASGD_RETURN_IF_ERROR(CheckModelMatchesLayout(spec, client.layout()));
  return spec;
}

// Where minibatches come from.
class Trainer::BatchSource {
 public:
  virtual ~BatchSource() = default;
  // Fills a minibatch of n frames; false when the data is used up.
  virtual absl::StatusOr<bool> Next(int n, absl::Span<float> inputs,
                                    absl::Span<int32_t> labels) = 0;
  // Passes over the data so far.
  virtual double epochs() const = 0;
};

// This worker's own frames in a seeded random order, for `epochs` passes.
class Trainer::LocalSource : public Trainer::BatchSource {
 public:
  LocalSource(const FrameData* data, uint64_t seed, double epochs)
      : sampler_(data, seed), epochs_(epochs) {}
  absl::StatusOr<bool> Next(int n, absl::Span<float> inputs,
                            absl::Span<int32_t> labels) override {
    if (epochs_ > 0 && sampler_.epochs() >= epochs_) return false;
    sampler_.Next(n, inputs, labels);
    return true;
  }
  double epochs() const override { return sampler_.epochs(); }

 private:
  MinibatchSampler sampler_;
  const double epochs_;
};

// Minibatch ids from the shared pool on server 0; every worker holds all
// frames and maps a batch id to frames through EpochOrder.
class Trainer::PoolSource : public Trainer::BatchSource {
 public:
  PoolSource(ParamClient* client, const FrameData* data, uint64_t seed,
             int batch_size, double epochs)
      : client_(client), data_(data), seed_(seed), batch_size_(batch_size),
        epochs_(epochs) {}
  absl::StatusOr<bool> Next(int n, absl::Span<float> inputs,
                            absl::Span<int32_t> labels) override {
    if (n != batch_size_) return absl::InternalError("pool batch size changed");
    if (queue_.empty()) {
      if (exhausted_) return false;
      ASGD_ASSIGN_OR_RETURN(PoolGrant grant,
                            client_->FetchBatches(data_->num_frames(),
                                                  batch_size_, epochs_, 2));
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
      order_ = EpochOrder(data_->num_frames(), seed_, epoch);
      order_epoch_ = epoch;
    }
    const int64_t first = static_cast<int64_t>(id % per_epoch_) * batch_size_;
    for (int i = 0; i < n; ++i) {
      const int64_t f = order_[first + i];
      data_->Splice(f, inputs.data() + int64_t{i} * data_->input_dim());
      labels[i] = data_->label(f);
    }
    ++taken_;
    return true;
  }
  double epochs() const override {
    return static_cast<double>(taken_) * batch_size_ / data_->num_frames();
  }

 private:
  ParamClient* const client_;
  const FrameData* const data_;
  const uint64_t seed_;
  const int batch_size_;
  const double epochs_;
  std::vector<uint64_t> queue_;  // next id at the back
  uint64_t per_epoch_ = 1;
  bool exhausted_ = false;
  std::optional<uint64_t> order_epoch_;
  std::vector<int64_t> order_;
  int64_t taken_ = 0;
};

Trainer::Trainer(ParamClient* client, DnnBackend* backend,
                 const FrameData* train, const FrameData* heldout,
                 const TrainerOptions& options, std::ostream* log)
    : client_(client),
      backend_(backend),
      train_(train),
      heldout_(heldout),
      options_(options),
      log_(log),
      jitter_state_(options.jitter_seed != 0
                        ? options.jitter_seed
                        : JitterSeed(options.worker_index)) {}

absl::Status Trainer::ValidateSetup() const {
  ASGD_RETURN_IF_ERROR(
      CheckModelMatchesLayout(backend_->spec(), client_->layout()));
  if (train_->num_frames() == 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "worker ", options_.worker_index,
        " has no training frames (more workers than utterances?)"));
  }
  if (train_->input_dim() != backend_->spec().input_dim) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the corpus gives ", train_->input_dim(),
        " inputs per frame but the model takes ", backend_->spec().input_dim));
  }
  if (options_.batch_size < 1 || options_.push_every < 1 ||
      options_.slowdown < 1.0) {
    return absl::InvalidArgumentError(
        "batch_size and push_every must be >= 1 and slowdown >= 1");
  }
  if (const int limit = client_->max_push_minibatches();
      limit > 0 && options_.push_every > limit) {
    return absl::InvalidArgumentError(
        absl::StrCat("--push_every=", options_.push_every,
                     " is more minibatches per push "
                     "than the servers accept (",
                     limit, "; asgd_server --max_push_minibatches)"));
  }
  if (options_.use_pool && options_.batch_size > train_->num_frames()) {
    return absl::InvalidArgumentError("batch larger than the training data");
  }
  if (options_.mode == TrainMode::kSync &&
      (options_.max_steps <= 0 || options_.use_pool ||
       options_.push_every != 1 || options_.compute_while_pushing)) {
    return absl::InvalidArgumentError(
        "synchronous mode needs a step count (equal on every worker), one "
        "minibatch per push, no background pushes and no minibatch pool");
  }
  return absl::OkStatus();
}

absl::StatusOr<float> Trainer::LocalLearningRate() const {
  if (options_.local_learning_rate > 0) return options_.local_learning_rate;
  auto it = client_->attributes().find("learning_rate");
  float lr = 0;
  if (it == client_->attributes().end() || !absl::SimpleAtof(it->second, &lr) ||
      !(lr > 0)) {
    return absl::FailedPreconditionError(
        "local SGD needs a learning rate: the servers do not publish one; "
        "pass it explicitly");
  }
  return lr;
}

void Trainer::LogProgress(const TrainResult& result, double epochs,
                          bool force) {
  if (log_ == nullptr || options_.log_every <= 0 || window_frames_ == 0) return;
  if (!force && result.steps % options_.log_every != 0) return;
  const double secs = absl::ToDoubleSeconds(absl::Now() - window_start_);
  *log_ << absl::StrFormat(
               "worker %d step %d epoch %.2f loss %.3f batch-acc %.1f%% "
               "frames/s %.0f max-staleness %d",
               options_.worker_index, result.steps, epochs,
               window_loss_ / window_frames_,
               100.0 * window_correct_ / window_frames_,
               window_frames_ / std::max(secs, 1e-9), window_staleness_)
        << std::endl;
  window_start_ = absl::Now();
  window_frames_ = window_correct_ = 0;
  window_loss_ = 0;
  window_staleness_ = 0;
}

absl::Status Trainer::MaybeEvaluate(TrainResult* result, uint64_t version,
                                    bool force) {
  if (heldout_ == nullptr || heldout_->num_frames() == 0) return absl::OkStatus();
  const bool by_steps = options_.eval_every > 0 && result->steps > 0 &&
                        result->steps % options_.eval_every == 0;
  const bool by_time =
      options_.eval_every_s > 0 &&
      absl::Now() - last_eval_ >= absl::Seconds(options_.eval_every_s);
  if (!force && !by_steps && !by_time) return absl::OkStatus();
  last_eval_ = absl::Now();
  EvalPoint point;
  point.seconds = absl::ToDoubleSeconds(absl::Now() - start_);
  point.frames = result->frames;
  point.version = version;
  return EvaluateAndReport(backend_, result->params, *heldout_, options_, force,
                           point, &result->evals, log_);
}

absl::Status Trainer::LocalSgd(BatchSource* source, float lr,
                               int64_t max_steps, TrainResult* result) {
  const int batch = options_.batch_size;
  std::vector<float> grad(result->params.size());
  std::vector<float> inputs(int64_t{batch} * train_->input_dim());
  std::vector<int32_t> labels(batch);
  for (;;) {
    if (max_steps > 0 && result->steps >= max_steps) break;
    absl::Time t0 = absl::Now();
    ASGD_ASSIGN_OR_RETURN(bool more, source->Next(batch, absl::MakeSpan(inputs),
                                                  absl::MakeSpan(labels)));
    if (!more) break;
    absl::Time t1 = absl::Now();
    ASGD_ASSIGN_OR_RETURN(BatchResult r,
                          backend_->ComputeGradient(result->params, inputs,
                                                    labels, absl::MakeSpan(grad)));
    for (size_t i = 0; i < grad.size(); ++i) result->params[i] -= lr * grad[i];
    absl::Time t2 = absl::Now();
    result->phases.data += absl::ToDoubleSeconds(t1 - t0);
    result->phases.compute += absl::ToDoubleSeconds(t2 - t1);
    if (options_.observer != nullptr) {
      options_.observer->OnStep(StepReport{batch, r.loss, r.correct,
                                           absl::ToDoubleSeconds(t1 - t0), 0,
                                           absl::ToDoubleSeconds(t2 - t1), 0});
    }
    ++result->steps;
    result->frames += batch;
    result->last_loss = r.loss;
    window_frames_ += batch;
    window_correct_ += r.correct;
    window_loss_ += r.loss * batch;
    LogProgress(*result, source->epochs(), false);
    ASGD_RETURN_IF_ERROR(MaybeEvaluate(result, 0, false));
  }
  return absl::OkStatus();
}

absl::Status Trainer::WarmStart(TrainResult* result,
                                std::vector<uint64_t>* versions) {
  if (options_.worker_index == 0) {
    ASGD_ASSIGN_OR_RETURN(float lr, LocalLearningRate());
    LocalSource source(train_, options_.seed * 104729 + 17,
                       options_.warm_start_epochs);
    if (log_ != nullptr) {
      *log_ << absl::StrFormat("worker 0 warm start: %.2f epochs of plain SGD (lr %g)",
                               options_.warm_start_epochs, lr)
            << std::endl;
    }
    TrainResult warm;
    warm.params = std::move(result->params);
    ASGD_RETURN_IF_ERROR(LocalSgd(&source, lr, /*max_steps=*/0, &warm));
    result->params = std::move(warm.params);
    ASGD_ASSIGN_OR_RETURN(PushOutcome outcome,
                          client_->Push(result->params, *versions, 1,
                                        PushKind::kAssign));
    (void)outcome;
    if (log_ != nullptr) {
      *log_ << "worker 0 warm start done after " << warm.steps
            << " steps; model handed to the servers" << std::endl;
    }
    return PullWithRetry(absl::MakeSpan(result->params), versions);
  }
  // Other workers wait for worker 0's model (every server past version 0).
  const absl::Time deadline = absl::Now() + options_.warm_start_timeout;
  for (;;) {
    ASGD_ASSIGN_OR_RETURN(std::vector<uint64_t> now, client_->Versions());
    if (std::all_of(now.begin(), now.end(), [](uint64_t v) { return v > 0; })) {
      break;
    }
    if (absl::Now() > deadline) {
      return absl::DeadlineExceededError(
          "timed out waiting for worker 0's warm-start model");
    }
    absl::SleepFor(absl::Milliseconds(100));  // polling a remote condition
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

absl::Status Trainer::BackOff(const absl::Status& error, absl::string_view what) {
  if (!Transient(error)) return error;
  const absl::Time now = absl::Now();
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
  if (options_.observer != nullptr) options_.observer->OnRpcRetry();
  if (log_ != nullptr) {
    *log_ << "worker " << options_.worker_index << ": " << what << " failed ("
          << error << "); retry " << failures_ << " in "
          << absl::FormatDuration(wait) << std::endl;
  }
  absl::SleepFor(wait);
  return absl::OkStatus();
}

absl::Status Trainer::PullWithRetry(absl::Span<float> params,
                                    std::vector<uint64_t>* versions) {
  for (;;) {
    absl::Status s = client_->Pull(params, versions);
    if (s.ok()) {
      if (failures_ > 0 && log_ != nullptr) {
        *log_ << "worker " << options_.worker_index
              << ": the pool answers again; resuming from a fresh pull"
              << std::endl;
      }
      failures_ = 0;
      return s;
    }
    ASGD_RETURN_IF_ERROR(BackOff(s, "pull"));
  }
}

absl::StatusOr<TrainResult> Trainer::Run() {
  ASGD_RETURN_IF_ERROR(ValidateSetup());
  const int64_t total = client_->layout().total_size();
  const int batch = options_.batch_size;
  TrainResult result;
  result.params.resize(total);
  std::vector<uint64_t> versions;
  start_ = last_eval_ = window_start_ = absl::Now();

  ASGD_RETURN_IF_ERROR(PullWithRetry(absl::MakeSpan(result.params), &versions));
  if (options_.warm_start_epochs > 0) {
    ASGD_RETURN_IF_ERROR(WarmStart(&result, &versions));
  }

  std::unique_ptr<BatchSource> source;
  if (options_.use_pool) {
    source = std::make_unique<PoolSource>(client_, train_, options_.pool_seed,
                                          batch, options_.epochs);
  } else {
    source = std::make_unique<LocalSource>(
        train_, options_.seed * 7919 + options_.worker_index, options_.epochs);
  }

  if (options_.mode == TrainMode::kSgd) {
    ASGD_ASSIGN_OR_RETURN(float lr, LocalLearningRate());
    ASGD_RETURN_IF_ERROR(LocalSgd(source.get(), lr, options_.max_steps, &result));
    LogProgress(result, source->epochs(), true);
    // Hand the model to the servers so it is evaluated like the others.
    ASGD_RETURN_IF_ERROR(
        client_->Push(result.params, versions, 1, PushKind::kAssign).status());
  } else {
    std::vector<float> grad(total), accum(total, 0.0f), outgoing(total);
    std::vector<float> inputs(int64_t{batch} * train_->input_dim());
    std::vector<int32_t> labels(batch);
    int accum_n = 0;
    std::vector<uint64_t> accum_versions;
    std::optional<std::future<absl::StatusOr<PushOutcome>>> in_flight;
    bool need_pull = false;  // the model was pulled just above

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
      if (options_.observer != nullptr) options_.observer->OnPush(*outcome);
      ++result.pushes;
      result.pushes_dropped += outcome->dropped;
      window_staleness_ = std::max(window_staleness_, outcome->max_staleness);
      need_pull = true;
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
      auto push = [this, &outgoing, base, n] {
        return client_->Push(outgoing, base, n);
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

    for (;;) {
      if (options_.max_steps > 0 && result.steps >= options_.max_steps) break;
      absl::Time t0 = absl::Now();
      if (in_flight.has_value() &&
          in_flight->wait_for(std::chrono::seconds(0)) ==
              std::future_status::ready) {
        ASGD_RETURN_IF_ERROR(collect());
      }
      absl::Time t1 = absl::Now();
      // After each completed push the model is refreshed, even while the
      // next push is already on the wire.
      if (need_pull) {
        ASGD_RETURN_IF_ERROR(
            PullWithRetry(absl::MakeSpan(result.params), &versions));
        need_pull = false;
      }
      absl::Time t2 = absl::Now();
      ASGD_ASSIGN_OR_RETURN(bool more, source->Next(batch, absl::MakeSpan(inputs),
                                                    absl::MakeSpan(labels)));
      if (!more) break;
      absl::Time t3 = absl::Now();
      ASGD_ASSIGN_OR_RETURN(BatchResult r,
                            backend_->ComputeGradient(result.params, inputs, labels,
                                                      absl::MakeSpan(grad)));
      absl::Time t4 = absl::Now();
      if (options_.slowdown > 1.0) {
        absl::SleepFor((t4 - t3) * (options_.slowdown - 1.0));
      }
      absl::Time t5 = absl::Now();
      if (accum_n == 0) accum_versions = versions;  // oldest model in the sum
      for (int64_t i = 0; i < total; ++i) accum[i] += grad[i];
      ++accum_n;
      ++result.steps;
      result.frames += batch;
      result.last_loss = r.loss;
      window_frames_ += batch;
      window_correct_ += r.correct;
      window_loss_ += r.loss * batch;

      if (accum_n >= options_.push_every) {
        const bool busy = in_flight.has_value() &&
                          in_flight->wait_for(std::chrono::seconds(0)) !=
                              std::future_status::ready;
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
      absl::Time t6 = absl::Now();
      result.phases.push += absl::ToDoubleSeconds((t1 - t0) + (t6 - t5));
      result.phases.pull += absl::ToDoubleSeconds(t2 - t1);
      result.phases.data += absl::ToDoubleSeconds(t3 - t2);
      result.phases.compute += absl::ToDoubleSeconds(t4 - t3);
      result.phases.idle += absl::ToDoubleSeconds(t5 - t4);
      if (options_.observer != nullptr) {
        options_.observer->OnStep(StepReport{
            batch, r.loss, r.correct, absl::ToDoubleSeconds(t3 - t2),
            absl::ToDoubleSeconds(t2 - t1), absl::ToDoubleSeconds(t4 - t3),
            absl::ToDoubleSeconds((t1 - t0) + (t6 - t5))});
      }
      LogProgress(result, source->epochs(), false);
      ASGD_RETURN_IF_ERROR(
          MaybeEvaluate(&result, versions.empty() ? 0 : versions[0], false));
    }
    // Flush: the background push, then whatever is still accumulated.
    absl::Time t0 = absl::Now();
    ASGD_RETURN_IF_ERROR(collect());
    if (accum_n > 0 && options_.mode == TrainMode::kAsgd) {
      ASGD_RETURN_IF_ERROR(start_push());
      ASGD_RETURN_IF_ERROR(collect());
    }
    result.phases.push += absl::ToDoubleSeconds(absl::Now() - t0);
    LogProgress(result, source->epochs(), true);
  }
  // Evaluate the freshest model the pool has.
  ASGD_RETURN_IF_ERROR(PullWithRetry(absl::MakeSpan(result.params), &versions));
  result.seconds = absl::ToDoubleSeconds(absl::Now() - start_);
  if (heldout_ != nullptr && heldout_->num_frames() > 0) {
    ASGD_RETURN_IF_ERROR(
        MaybeEvaluate(&result, versions.empty() ? 0 : versions[0], true));
    result.heldout_accuracy = result.evals.back().accuracy;
  }
  return result;
}

}  // namespace asgd
