#include "worker/decentralized_trainer.h"

#include <algorithm>
#include <future>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "common/status_macros.h"

namespace asgd {

bool IsDecentralizedMode(absl::string_view text) {
  return ParseDecentralizedMode(text).ok();
}

absl::StatusOr<DecentralizedMode> ParseDecentralizedMode(
    absl::string_view text) {
  if (text == "adpsgd") return DecentralizedMode::kAdpsgd;
  if (text == "allreduce") return DecentralizedMode::kAllreduce;
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown decentralized mode '", text, "' (want adpsgd or allreduce)"));
}

std::string DecentralizedModeName(DecentralizedMode mode) {
  return mode == DecentralizedMode::kAdpsgd ? "adpsgd" : "allreduce";
}

DecentralizedTrainer::DecentralizedTrainer(
    PeerModel* model, PeerClient* peers, AllreduceMailbox* mailbox,
    DnnBackend* backend, const FrameData* train, const FrameData* heldout,
    const TrainerOptions& options, const DecentralizedOptions& decentralized,
    std::ostream* log)
    : model_(model),
      peers_(peers),
      mailbox_(mailbox),
      backend_(backend),
      train_(train),
      heldout_(heldout),
      options_(options),
      decentralized_(decentralized),
      log_(log) {}

absl::Status DecentralizedTrainer::Validate() const {
  if (model_->size() != DnnParamCount(backend_->spec())) {
    return absl::FailedPreconditionError(
        "the model does not have the DNN layout this worker expects");
  }
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
  if (options_.batch_size < 1 || options_.slowdown < 1.0) {
    return absl::InvalidArgumentError(
        "batch_size must be >= 1 and slowdown >= 1");
  }
  if (options_.use_pool || options_.warm_start_epochs > 0) {
    return absl::InvalidArgumentError(
        "the decentralized modes train on static partitions from the "
        "servers' initial model: no minibatch pool, no warm start");
  }
  if (!(decentralized_.learning_rate > 0)) {
    return absl::InvalidArgumentError("the learning rate must be > 0");
  }
  if (peers_->worker_index() != options_.worker_index) {
    return absl::InvalidArgumentError("peer client of another worker");
  }
  if (decentralized_.mode == DecentralizedMode::kAllreduce) {
    if (options_.max_steps <= 0 || mailbox_ == nullptr) {
      return absl::InvalidArgumentError(
          "allreduce needs a step count (equal on every worker) and a "
          "mailbox");
    }
    if (decentralized_.delay_by_one) {
      return absl::InvalidArgumentError(
          "delay-by-one is an adpsgd variant; allreduce is synchronous");
    }
    if (mailbox_->size() != model_->size() ||
        mailbox_->num_workers() != peers_->num_workers()) {
      return absl::InvalidArgumentError("allreduce mailbox of another shape");
    }
  }
  return absl::OkStatus();
}

void DecentralizedTrainer::LogProgress(const DecentralizedResult& result,
                                       double epochs, bool force) {
  if (log_ == nullptr || options_.log_every <= 0 || window_frames_ == 0) return;
  if (!force && result.train.steps % options_.log_every != 0) return;
  const double secs = absl::ToDoubleSeconds(absl::Now() - window_start_);
  std::string line = absl::StrFormat(
      "worker %d step %d epoch %.2f loss %.3f batch-acc %.1f%% frames/s %.0f",
      options_.worker_index, result.train.steps, epochs,
      window_loss_ / window_frames_, 100.0 * window_correct_ / window_frames_,
      window_frames_ / std::max(secs, 1e-9));
  if (decentralized_.mode == DecentralizedMode::kAdpsgd &&
      consensus_distance_ >= 0) {
    absl::StrAppendFormat(&line, " consensus-distance %.4g",
                          consensus_distance_);
  }
  *log_ << line << std::endl;
  window_start_ = absl::Now();
  window_frames_ = window_correct_ = 0;
  window_loss_ = 0;
}

absl::Status DecentralizedTrainer::MaybeEvaluate(DecentralizedResult* result,
                                                 bool force) {
  if (heldout_ == nullptr || heldout_->num_frames() == 0) {
    return absl::OkStatus();
  }
  const int64_t steps = result->train.steps;
  const bool by_steps =
      options_.eval_every > 0 && steps > 0 && steps % options_.eval_every == 0;
  const bool by_time =
      options_.eval_every_s > 0 &&
      absl::Now() - last_eval_ >= absl::Seconds(options_.eval_every_s);
  if (!force && !by_steps && !by_time) return absl::OkStatus();
  last_eval_ = absl::Now();
  std::vector<float>& params = result->train.params;
  params.resize(model_->size());
  model_->Read(absl::MakeSpan(params));
  EvalPoint point;
  point.seconds = absl::ToDoubleSeconds(absl::Now() - start_);
  point.frames = result->train.frames;
  point.version = static_cast<uint64_t>(steps);
  return EvaluateAndReport(backend_, params, *heldout_, options_, force, point,
                           &result->train.evals, log_);
}

absl::StatusOr<DecentralizedResult> DecentralizedTrainer::Run() {
  ASGD_RETURN_IF_ERROR(Validate());
  const int64_t total = model_->size();
  const int batch = options_.batch_size;
  const float lr = decentralized_.learning_rate;
  const bool adpsgd = decentralized_.mode == DecentralizedMode::kAdpsgd;
  const bool delayed = adpsgd && decentralized_.delay_by_one;
  const int n = peers_->num_workers();

  DecentralizedResult result;
  TrainResult& r = result.train;
  start_ = last_eval_ = window_start_ = absl::Now();
  MinibatchSampler sampler(train_,
                           options_.seed * 7919 + options_.worker_index);
  AdpsgdAverager averager(model_, peers_, decentralized_.adpsgd,
                          decentralized_.peer_observer);
  std::vector<float> snapshot(total), grad(total), pending(total);
  bool have_pending = false;
  std::vector<float> inputs(int64_t{batch} * train_->input_dim());
  std::vector<int32_t> labels(batch);

  auto flush_log = [&] {
    for (const std::string& line : averager.TakeLogLines()) {
      if (log_ != nullptr) *log_ << line << std::endl;
    }
    if (averager.stats().last_distance >= 0) {
      consensus_distance_ = averager.stats().last_distance;
    }
  };

  for (uint64_t step = 0;; ++step) {
    if (options_.max_steps > 0 && r.steps >= options_.max_steps) break;
    // Allreduce runs in lockstep: exactly max_steps steps on every worker.
    if (adpsgd && options_.epochs > 0 && sampler.epochs() >= options_.epochs) {
      break;
    }
    const absl::Time t0 = absl::Now();
    sampler.Next(batch, absl::MakeSpan(inputs), absl::MakeSpan(labels));
    const absl::Time t1 = absl::Now();
    model_->Read(absl::MakeSpan(snapshot));
    // Delay-by-one: this step's averaging and the previous step's update run
    // beside the gradient computation.
    std::optional<std::future<void>> communication;
    if (delayed) {
      communication = std::async(std::launch::async, [&, step] {
        averager.Step(step);
        if (have_pending) model_->ApplyGradient(pending, lr);
      });
    }
    absl::StatusOr<BatchResult> computed = backend_->ComputeGradient(
        snapshot, inputs, labels, absl::MakeSpan(grad));
    const absl::Time t2 = absl::Now();
    if (computed.ok() && options_.slowdown > 1.0) {
      absl::SleepFor((t2 - t1) * (options_.slowdown - 1.0));
    }
    const absl::Time t3 = absl::Now();
    if (communication.has_value()) communication->get();
    ASGD_RETURN_IF_ERROR(computed.status());
    if (delayed) {
      std::swap(pending, grad);
      have_pending = true;
    } else if (adpsgd) {
      averager.Step(step);
      model_->ApplyGradient(grad, lr);
    } else {
      ASGD_RETURN_IF_ERROR(RingAllreduce(peers_, mailbox_, step,
                                         absl::MakeSpan(grad),
                                         decentralized_.allreduce_timeout));
      model_->ApplyGradient(grad, lr, 1.0f / n);
      ++result.allreduces;
    }
    const absl::Time t4 = absl::Now();
    flush_log();

    ++r.steps;
    r.frames += batch;
    r.last_loss = computed->loss;
    window_frames_ += batch;
    window_correct_ += computed->correct;
    window_loss_ += computed->loss * batch;
    r.phases.data += absl::ToDoubleSeconds(t1 - t0);
    r.phases.compute += absl::ToDoubleSeconds(t2 - t1);
    r.phases.idle += absl::ToDoubleSeconds(t3 - t2);
    r.phases.push += absl::ToDoubleSeconds(t4 - t3);
    if (options_.observer != nullptr) {
      options_.observer->OnStep(StepReport{
          batch, computed->loss, computed->correct,
          absl::ToDoubleSeconds(t1 - t0), 0, absl::ToDoubleSeconds(t2 - t1),
          absl::ToDoubleSeconds(t4 - t3)});
    }
    LogProgress(result, sampler.epochs(), false);
    ASGD_RETURN_IF_ERROR(MaybeEvaluate(&result, false));
  }
  // The last delayed gradient has not been applied yet.
  if (have_pending) model_->ApplyGradient(pending, lr);
  LogProgress(result, sampler.epochs(), true);
  result.averages = averager.stats();
  r.seconds = absl::ToDoubleSeconds(absl::Now() - start_);
  r.params.resize(total);
  model_->Read(absl::MakeSpan(r.params));
  return result;
}

}  // namespace asgd
