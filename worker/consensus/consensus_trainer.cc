#include "worker/consensus/consensus_trainer.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "common/refusal.h"
#include "common/status_macros.h"
#include "worker/consensus/consensus_rules.h"
#include "worker/data/look_ahead_source.h"
#include "worker/data/make_examples.h"
#include "worker/peer/peer_model.h"
#include "worker/ps/push_encoder.h"

namespace asgd {

bool IsConsensusMode(absl::string_view text) {
  return ParseConsensusMode(text).ok();
}

absl::StatusOr<ConsensusRule> ParseConsensusMode(absl::string_view text) {
  if (text == "easgd") return ConsensusRule::kEasgd;
  if (text == "admm") return ConsensusRule::kAdmm;
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown consensus mode '", text, "' (want easgd or admm)"));
}

std::string ConsensusModeName(ConsensusRule rule) {
  return rule == ConsensusRule::kEasgd ? "easgd" : "admm";
}

absl::Status ValidateConsensusOptions(const ConsensusOptions& o) {
  ASGD_RETURN_IF_ERROR(ValidateLoopOptions(o.loop));
  if (!(o.learning_rate > 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("the local learning rate must be > 0, got ",
                     o.learning_rate));
  }
  if (o.every < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "minibatches between communications must be >= 1, got ", o.every));
  }
  if (!(o.alpha > 0 && o.alpha <= 1)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the elastic coefficient alpha must be in (0, 1], got ", o.alpha));
  }
  if (!(o.rho > 0) || !std::isfinite(o.rho)) {
    return absl::InvalidArgumentError(
        absl::StrCat("the ADMM penalty rho must be > 0, got ", o.rho));
  }
  return absl::OkStatus();
}

// The run's buffers (flat, layout order) and the consensus's versions.
struct ConsensusTrainer::State {
  explicit State(int64_t n, bool admm)
      : x(n), z(n), grad(n), values(n), lam(admm ? n : 0) {}
  std::vector<float> x, z, grad;
  std::vector<float> values;  // what the next push sends: e, or the point u
  std::vector<float> lam;     // admm only
  std::vector<uint64_t> versions;     // of z
  std::vector<bool> applied;          // per server, of the last push
  double distance = -1;
};

ConsensusTrainer::ConsensusTrainer(ParamClient* client, ModelBackend* backend,
                                   const ExampleSet* train,
                                   const ExampleSet* heldout,
                                   const ConsensusOptions& options,
                                   std::ostream* log)
    : client_(client),
      backend_(backend),
      train_(train),
      options_(options),
      log_(log),
      reporter_(options.loop, backend, heldout, log),
      retry_(options.retry, options.loop.worker_index, options.loop.observer,
             reporter_.clock(), log) {}

absl::Status ConsensusTrainer::PullWithRetry(State* s) {
  return retry_.Retry(
      [&] { return client_->Pull(absl::MakeSpan(s->z), &s->versions); },
      "pull", "the pool answers again; resuming from a fresh pull");
}

absl::Status ConsensusTrainer::PushAdd(State* s, ConsensusResult* result) {
  const PushEncoder* encoder = client_->push_encoder();
  const int servers = client_->layout().num_servers();
  std::vector<ServerPush> parts;
  parts.reserve(servers);
  const bool admm = options_.rule == ConsensusRule::kAdmm;
  for (int i = 0; i < servers; ++i) {
    parts.push_back(encoder->EncodeUncompressed(
        i, s->values, admm ? PushKind::kAdmm : PushKind::kAdd));
    parts.back().admm_slot = options_.loop.worker_index;
  }
  const std::vector<absl::StatusOr<ServerPushReply>> replies =
      client_->PushEncoded(parts, s->versions, 1);
  s->applied.assign(servers, false);
  PushOutcome outcome;
  for (int i = 0; i < servers; ++i) {
    const absl::StatusOr<ServerPushReply>& r = replies[i];
    if (r.ok()) {
      s->applied[i] = r->applied;
      ++(r->applied ? outcome.applied : outcome.dropped);
      outcome.max_staleness = std::max(outcome.max_staleness, r->staleness);
      continue;
    }
    ++result->parts_dropped;
    if (RefusalOf(r.status()) != Refusal::kNone) {
      ++result->train.pushes_busy;  // overloaded: the next round carries it
      continue;
    }
    // A server that is away is waited out; a push it refused as malformed
    // ends the run.
    ASGD_RETURN_IF_ERROR(retry_.BackOff(r.status(), "push"));
  }
  result->parts_dropped += outcome.dropped;
  result->train.pushes_dropped += outcome.dropped;
  ++result->train.pushes;
  window_staleness_ = std::max(window_staleness_, outcome.max_staleness);
  if (TrainerObserver* observer = options_.loop.observer) {
    observer->OnPush(PushReport{outcome.max_staleness, outcome.dropped});
  }
  return absl::OkStatus();
}

absl::Status ConsensusTrainer::Communicate(State* s, ConsensusResult* result) {
  const ModelLayout& layout = client_->layout();
  const bool admm = options_.rule == ConsensusRule::kAdmm;
  Clock* const clock = reporter_.clock();
  const absl::Time t0 = clock->Now();
  absl::Time t1 = t0;
  if (!admm) {
    ASGD_RETURN_IF_ERROR(PullWithRetry(s));
    t1 = clock->Now();
    s->distance = L2Distance(s->x, s->z);
    ElasticDifference(s->x, s->z, options_.alpha, absl::MakeSpan(s->values));
  } else {
    AdmmPoint(s->x, s->lam, options_.rho, absl::MakeSpan(s->values));
  }
  ASGD_RETURN_IF_ERROR(PushAdd(s, result));
  int applied = 0;
  for (int i = 0; i < layout.num_servers(); ++i) {
    if (!s->applied[i]) continue;
    ++applied;
    if (admm) continue;  // the servers keep the point
    const FlatRange r = layout.ServerRange(i);
    ElasticStep(absl::MakeConstSpan(s->values).subspan(r.begin, r.size()),
                absl::MakeSpan(s->x).subspan(r.begin, r.size()));
  }
  const absl::Time t2 = clock->Now();
  if (admm) {
    ASGD_RETURN_IF_ERROR(PullWithRetry(s));
    AdmmDualStep(s->x, s->z, options_.rho, absl::MakeSpan(s->lam));
    s->distance = L2Distance(s->x, s->z);
  }
  const absl::Time t3 = clock->Now();
  result->train.phases.pull +=
      absl::ToDoubleSeconds((t1 - t0) + (t3 - t2));
  result->train.phases.push += absl::ToDoubleSeconds(t2 - t1);
  ++result->rounds;
  result->last_distance = s->distance;
  if (options_.observer != nullptr) {
    options_.observer->OnRound(applied, layout.num_servers(), s->distance);
  }
  return absl::OkStatus();
}

absl::Status ConsensusTrainer::TakeSlot(State* s, ConsensusResult* result) {
  const int slot = options_.loop.worker_index;
  absl::Status pulled = retry_.Retry(
      [&] { return client_->PullAdmmSlot(slot, absl::MakeSpan(s->values)); },
      "pull of the ADMM slot", "the pool answers again");
  if (!pulled.ok()) {
    return absl::Status(
        pulled.code(),
        absl::StrCat("ADMM slot ", slot,
                     " (--worker_index): ", pulled.message(),
                     " (ADMM needs servers started with --admm_slots=N, N "
                     "the number of ADMM workers)"));
  }
  AdmmDualOfPoint(s->values, s->x, options_.rho, absl::MakeSpan(s->lam));
  result->slot_distance = L2Distance(s->values, s->z);
  if (log_ != nullptr) {
    *log_ << absl::StrFormat(
        "worker %d admm slot %d: |u_slot - z| %.4g (dual rho (u_slot - z): "
        "the slot's point stays in the average)\n",
        slot, slot, result->slot_distance);
  }
  return absl::OkStatus();
}

std::string ConsensusTrainer::ProgressExtra(const ConsensusResult& result) {
  std::string extra = absl::StrCat(" max-staleness ", window_staleness_);
  window_staleness_ = 0;
  if (result.last_distance >= 0) {
    absl::StrAppendFormat(&extra, " consensus-distance %.4g",
                          result.last_distance);
  }
  return extra;
}

absl::StatusOr<ConsensusResult> ConsensusTrainer::Run() {
  ASGD_RETURN_IF_ERROR(ValidateConsensusOptions(options_));
  const LoopOptions& loop = options_.loop;
  const int64_t total = client_->layout().total_size();
  ASGD_RETURN_IF_ERROR(CheckLoopSetup(loop, *backend_, *train_, total,
                                      options_.open_source != nullptr));
  if (client_->push_encoder() == nullptr) {
    return absl::FailedPreconditionError(
        "the parameter client has no push encoder");
  }
  const bool admm = options_.rule == ConsensusRule::kAdmm;
  ConsensusResult result;
  TrainResult& r = result.train;
  Clock* const clock = reporter_.clock();
  State s(total, admm);

  // Every worker starts at the consensus: x = z (admm: lam from its slot).
  const absl::Time start = clock->Now();
  ASGD_RETURN_IF_ERROR(PullWithRetry(&s));
  s.x = s.z;
  if (admm) ASGD_RETURN_IF_ERROR(TakeSlot(&s, &result));
  r.phases.pull += absl::ToDoubleSeconds(clock->Now() - start);

  const BatchShape shape = ShapeOfBatch(*train_, loop.batch_size);
  const uint64_t seed = loop.seed * 7919 + loop.worker_index;
  std::unique_ptr<BatchSource> source;
  if (options_.open_source) {
    ASGD_ASSIGN_OR_RETURN(source, options_.open_source(seed, loop.epochs));
  } else {
    source = std::make_unique<LocalSource>(train_, seed, loop.epochs);
  }
  BatchBuffer batch(shape.examples, shape.steps, train_->input_dim(),
                    train_->labels_per_row());
  // A GPU backend uploads the next minibatch while this one computes.
  source = StageAhead(std::move(source), backend_, batch);
  int since_round = 0;
  while (!reporter_.Done(r.steps)) {
    const absl::Time t0 = clock->Now();
    ASGD_ASSIGN_OR_RETURN(const bool more, source->Next(&batch));
    if (!more) break;
    const absl::Time t1 = clock->Now();
    ASGD_ASSIGN_OR_RETURN(
        const BatchResult computed,
        backend_->ComputeGradient(s.x, batch.view(), absl::MakeSpan(s.grad)));
    const absl::Time t2 = clock->Now();
    if (loop.slowdown > 1.0) clock->SleepFor((t2 - t1) * (loop.slowdown - 1.0));
    const absl::Time t3 = clock->Now();
    ASGD_RETURN_IF_ERROR(CheckStepFinite(computed, s.grad, batch.view(), loop,
                                         r.steps + 1, source->epochs(),
                                         "training"));
    if (admm) {
      AugmentAdmmGradient(s.x, s.z, s.lam, options_.rho,
                          absl::MakeSpan(s.grad));
    }
    SgdStep(s.grad, options_.learning_rate, absl::MakeSpan(s.x));
    PhaseTimes phases;
    phases.data = absl::ToDoubleSeconds(t1 - t0);
    phases.compute = absl::ToDoubleSeconds(t2 - t1);
    phases.idle = absl::ToDoubleSeconds(t3 - t2);
    reporter_.BookStep(computed, LabelledFrames(batch.view()), phases, &r);
    if (++since_round == options_.every) {
      ASGD_RETURN_IF_ERROR(Communicate(&s, &result));
      since_round = 0;
    }
    if (loop.log_every > 0 && r.steps % loop.log_every == 0) {
      reporter_.MaybeLog(r, source->epochs(), ProgressExtra(result));
    }
    if (reporter_.EvalDue(r.steps)) {
      ASGD_RETURN_IF_ERROR(reporter_.Evaluate(s.z, s.versions[0],
                                              /*full=*/false, &r));
    }
  }
  // The last steps reach the consensus, then the final consensus comes back.
  if (since_round > 0) ASGD_RETURN_IF_ERROR(Communicate(&s, &result));
  if (!admm) ASGD_RETURN_IF_ERROR(PullWithRetry(&s));
  reporter_.MaybeLog(r, source->epochs(), ProgressExtra(result),
                     /*force=*/true);
  r.seconds = reporter_.Seconds();
  r.params = s.z;
  result.local = std::move(s.x);
  return result;
}

}  // namespace asgd
