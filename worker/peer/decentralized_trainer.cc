#include "worker/peer/decentralized_trainer.h"

#include <algorithm>
#include <future>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "common/status_macros.h"
#include "worker/data/look_ahead_source.h"
#include "worker/data/make_examples.h"

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
    ModelBackend* backend, const ExampleSet* train, const ExampleSet* heldout,
    const DecentralizedOptions& options, std::ostream* log)
    : model_(model),
      peers_(peers),
      mailbox_(mailbox),
      backend_(backend),
      train_(train),
      heldout_(heldout),
      options_(options),
      log_(log),
      reporter_(options.loop, backend, heldout, log) {}

absl::Status DecentralizedTrainer::Validate() const {
  const LoopOptions& loop = options_.loop;
  ASGD_RETURN_IF_ERROR(CheckLoopSetup(loop, *backend_, *train_, model_->size(),
                                      options_.open_source != nullptr));
  if (!(options_.learning_rate > 0)) {
    return absl::InvalidArgumentError("the learning rate must be > 0");
  }
  if (peers_->worker_index() != loop.worker_index) {
    return absl::InvalidArgumentError("peer client of another worker");
  }
  if (options_.mode == DecentralizedMode::kAllreduce) {
    if (loop.max_steps <= 0 || loop.max_seconds > 0 || mailbox_ == nullptr) {
      return absl::InvalidArgumentError(
          "allreduce needs a step count (equal on every worker, no time "
          "budget) and a mailbox");
    }
    if (options_.delay_by_one) {
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

std::string DecentralizedTrainer::ProgressExtra() const {
  if (options_.mode != DecentralizedMode::kAdpsgd || consensus_distance_ < 0) {
    return "";
  }
  return absl::StrFormat(" consensus-distance %.4g", consensus_distance_);
}

absl::Status DecentralizedTrainer::Evaluate(DecentralizedResult* result,
                                            bool full) {
  std::vector<float>& params = result->train.params;
  params.resize(model_->size());
  model_->Read(absl::MakeSpan(params));
  return reporter_.Evaluate(params, static_cast<uint64_t>(result->train.steps),
                            full, &result->train);
}

absl::StatusOr<DecentralizedResult> DecentralizedTrainer::Run() {
  ASGD_RETURN_IF_ERROR(Validate());
  const LoopOptions& loop = options_.loop;
  const int64_t total = model_->size();
  const float lr = options_.learning_rate;
  const bool adpsgd = options_.mode == DecentralizedMode::kAdpsgd;
  const bool delayed = adpsgd && options_.delay_by_one;
  const int n = peers_->num_workers();
  Clock* const clock = reporter_.clock();

  DecentralizedResult result;
  TrainResult& r = result.train;
  const BatchShape shape = ShapeOfBatch(*train_, loop.batch_size);
  // Allreduce runs in lockstep, exactly max_steps steps on every worker: its
  // data wraps around.
  const uint64_t seed = loop.seed * 7919 + loop.worker_index;
  const double epochs = adpsgd ? loop.epochs : 0;
  std::unique_ptr<BatchSource> source;
  if (options_.open_source) {
    ASGD_ASSIGN_OR_RETURN(source, options_.open_source(seed, epochs));
  } else {
    source = std::make_unique<LocalSource>(train_, seed, epochs);
  }
  AdpsgdAverager averager(model_, peers_, options_.adpsgd,
                          options_.peer_observer);
  std::vector<float> snapshot(total), grad(total), pending(total);
  bool have_pending = false;
  BatchBuffer batch(shape.examples, shape.steps, train_->input_dim(),
                    train_->labels_per_row());
  // A GPU backend uploads the next minibatch while this one computes.
  source = StageAhead(std::move(source), backend_, batch);

  auto flush_log = [&] {
    for (const std::string& line : averager.TakeLogLines()) {
      if (log_ != nullptr) *log_ << line << std::endl;
    }
    if (averager.stats().last_distance >= 0) {
      consensus_distance_ = averager.stats().last_distance;
    }
  };

  for (uint64_t step = 0;; ++step) {
    if (reporter_.Done(r.steps)) break;
    const absl::Time t0 = clock->Now();
    ASGD_ASSIGN_OR_RETURN(const bool more, source->Next(&batch));
    if (!more) break;
    const absl::Time t1 = clock->Now();
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
        snapshot, batch.view(), absl::MakeSpan(grad));
    const absl::Time t2 = clock->Now();
    if (computed.ok() && loop.slowdown > 1.0) {
      clock->SleepFor((t2 - t1) * (loop.slowdown - 1.0));
    }
    const absl::Time t3 = clock->Now();
    if (communication.has_value()) communication->get();
    ASGD_RETURN_IF_ERROR(computed.status());
    // Before the gradient reaches the model or the peers.
    ASGD_RETURN_IF_ERROR(CheckStepFinite(*computed, grad, batch.view(), loop,
                                         r.steps + 1, source->epochs(),
                                         "training"));
    if (delayed) {
      std::swap(pending, grad);
      have_pending = true;
    } else if (adpsgd) {
      averager.Step(step);
      model_->ApplyGradient(grad, lr);
    } else {
      ASGD_RETURN_IF_ERROR(RingAllreduce(peers_, mailbox_, step,
                                         absl::MakeSpan(grad),
                                         options_.allreduce_timeout));
      model_->ApplyGradient(grad, lr, 1.0f / n);
      ++result.allreduces;
    }
    const absl::Time t4 = clock->Now();
    flush_log();

    PhaseTimes phases;
    phases.data = absl::ToDoubleSeconds(t1 - t0);
    phases.compute = absl::ToDoubleSeconds(t2 - t1);
    phases.idle = absl::ToDoubleSeconds(t3 - t2);
    phases.push = absl::ToDoubleSeconds(t4 - t3);
    reporter_.BookStep(*computed, LabelledFrames(batch.view()), phases, &r);
    reporter_.MaybeLog(r, source->epochs(), ProgressExtra());
    if (reporter_.EvalDue(r.steps)) {
      ASGD_RETURN_IF_ERROR(Evaluate(&result, false));
    }
  }
  // The last delayed gradient has not been applied yet.
  if (have_pending) model_->ApplyGradient(pending, lr);
  reporter_.MaybeLog(r, source->epochs(), ProgressExtra(), /*force=*/true);
  result.averages = averager.stats();
  r.seconds = reporter_.Seconds();
  r.params.resize(total);
  model_->Read(absl::MakeSpan(r.params));
  return result;
}

}  // namespace asgd
