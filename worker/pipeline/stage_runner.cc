#include "worker/pipeline/stage_runner.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "model/cpu_layer_range.h"
#include "worker/consensus/consensus_rules.h"

namespace asgd {
namespace {

bool AllFinite(absl::Span<const float> v) {
  float acc = 0.0f;
  for (float x : v) acc += x * 0.0f;  // NaN for any NaN or Inf
  return acc == 0.0f;
}

}  // namespace

int StageWindow(int depth, int stage) { return std::max(1, depth - stage); }

absl::Status LocalSgd::Apply(absl::Span<const float> grad,
                             absl::Span<float> params) {
  SgdStep(grad, learning_rate_, params);
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<StageRunner>> StageRunner::Create(
    const StageRunnerOptions& options) {
  const int stages = options.plan.stages();
  if (options.stage < 0 || options.stage >= stages) {
    return absl::InvalidArgumentError(absl::StrCat(
        "stage ", options.stage, " is not one of the plan's ", stages));
  }
  if (options.depth < 1 || options.depth > stages) {
    return absl::InvalidArgumentError(
        absl::StrCat("pipeline depth ", options.depth, " must be in [1, ",
                     stages, "] (the number of stages)"));
  }
  if (!(options.learning_rate > 0) || !std::isfinite(options.learning_rate)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the learning rate must be > 0, got ", options.learning_rate));
  }
  if (!(options.slowdown >= 1.0) || !std::isfinite(options.slowdown)) {
    return absl::InvalidArgumentError(
        absl::StrCat("the slowdown must be >= 1, got ", options.slowdown));
  }
  auto runner = std::unique_ptr<StageRunner>(new StageRunner(options));
  runner->window_ = StageWindow(options.depth, options.stage);
  runner->updater_ = options.updater;
  if (runner->updater_ == nullptr) {
    runner->local_sgd_ = std::make_unique<LocalSgd>(options.learning_rate);
    runner->updater_ = runner->local_sgd_.get();
  }
  runner->last_ = options.stage == stages - 1;
  const LayerRangeFactory create = options.range_factory != nullptr
                                      ? options.range_factory
                                      : LayerRangeFactory(CreateCpuLayerRange);
  const int first = options.plan.bounds[options.stage];
  const int last = options.plan.bounds[options.stage + 1];
  for (int k = 0; k < runner->window_; ++k) {
    Slot slot;
    ASGD_ASSIGN_OR_RETURN(slot.range,
                          create(options.spec, first, last, options.max_rows));
    if (runner->window_ > 1) slot.weights.resize(slot.range->param_count());
    runner->slots_.push_back(std::move(slot));
    runner->free_slots_.push_back(runner->window_ - 1 - k);
  }
  ASGD_ASSIGN_OR_RETURN(runner->eval_range_,
                        create(options.spec, first, last, options.max_rows));
  const LayerRange& range = *runner->slots_.front().range;
  runner->dparams_.resize(range.param_count());
  if (options.stage > 0) {
    runner->din_.resize(int64_t{options.max_rows} * range.in_dim());
  }
  return runner;
}

StageRunner::StageRunner(const StageRunnerOptions& options)
    : options_(options),
      clock_(options.clock != nullptr ? options.clock : RealClock()) {}

absl::Status StageRunner::CheckInput(const StageBatch& in) const {
  const LayerRange& range = layers();
  const int64_t rows = int64_t{in.sequences} * in.steps;
  if (in.sequences < 1 || in.steps < 1 || rows > options_.max_rows ||
      static_cast<int64_t>(in.values.size()) != rows * range.in_dim() ||
      (last_ && static_cast<int64_t>(in.labels.size()) !=
                    rows * options_.spec.output_frames)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "stage ", options_.stage, ": minibatch ", in.seq, " has ",
        in.sequences, " x ", in.steps, " rows, ", in.values.size(),
        " values and ", in.labels.size(), " labels; want at most ",
        options_.max_rows, " rows of ", range.in_dim(), " values"));
  }
  if (!last_) return absl::OkStatus();
  for (size_t i = 0; i < in.labels.size(); ++i) {
    const int32_t label = in.labels[i];
    if (label != kNoLabel &&
        (label < 0 || label >= options_.spec.num_classes)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "stage ", options_.stage, ": minibatch ", in.seq, " label ", i,
          " is ", label, ", outside [0, ", options_.spec.num_classes, ")"));
    }
  }
  return absl::OkStatus();
}

absl::Status StageRunner::ForwardEvaluate(absl::Span<float> params,
                                          StageBatch in, UpstreamLink* up,
                                          DownstreamLink* down) {
  LayerRange& range = *eval_range_;
  ASGD_RETURN_IF_ERROR(
      range.Forward(params.data(), in.values.data(), in.sequences, in.steps));
  if (last_) {
    Batch batch;
    batch.sequences = in.sequences;
    batch.steps = in.steps;
    batch.inputs = in.values;
    batch.labels = in.labels;
    const BatchResult r = range.Loss(batch);
    ++stats_.evaluated;
    StageGrad answer;
    answer.seq = in.seq;
    answer.loss = r.loss;
    answer.labelled = r.labelled;
    answer.correct = r.correct;
    return up->Answer(std::move(answer));
  }
  StageBatch out;
  out.seq = in.seq;
  out.sequences = in.sequences;
  out.steps = in.steps;
  out.evaluate = true;
  out.values.assign(range.out(), range.out() + int64_t{in.rows()} *
                                                   range.out_dim());
  out.labels = std::move(in.labels);
  InFlight f;
  f.evaluate = true;
  f.input.seq = in.seq;
  f.input.sequences = in.sequences;
  f.input.steps = in.steps;
  in_flight_.push_back(std::move(f));
  stats_.max_in_flight =
      std::max(stats_.max_in_flight, static_cast<int>(in_flight_.size()));
  return down->Send(out);
}

absl::Status StageRunner::Forward(absl::Span<float> params, StageBatch in,
                                  UpstreamLink* up, DownstreamLink* down) {
  ASGD_RETURN_IF_ERROR(CheckInput(in));
  if (in.evaluate) return ForwardEvaluate(params, std::move(in), up, down);
  const absl::Time t0 = clock_->Now();
  if (!first_forward_.has_value()) first_forward_ = t0;
  InFlight f;
  f.slot = free_slots_.back();
  free_slots_.pop_back();
  Slot& slot = slots_[f.slot];
  const float* weights = params.data();
  if (!slot.weights.empty()) {
    std::copy(params.begin(), params.end(), slot.weights.begin());
    weights = slot.weights.data();
  }
  ASGD_RETURN_IF_ERROR(
      slot.range->Forward(weights, in.values.data(), in.sequences, in.steps));
  f.updates_at_forward = updates_;
  f.input = std::move(in);
  in_flight_.push_back(std::move(f));
  stats_.max_in_flight =
      std::max(stats_.max_in_flight, static_cast<int>(in_flight_.size()));
  const double seconds = absl::ToDoubleSeconds(clock_->Now() - t0);
  in_flight_.back().forward_seconds = seconds;
  stats_.forward_seconds += seconds;
  if (options_.observer != nullptr) {
    options_.observer->OnForward(seconds, static_cast<int>(in_flight_.size()));
  }
  const InFlight& held = in_flight_.back();
  if (last_) {
    Batch batch;
    batch.sequences = held.input.sequences;
    batch.steps = held.input.steps;
    batch.inputs = held.input.values;
    batch.labels = held.input.labels;
    const BatchResult r = slot.range->Loss(batch);
    StageGrad answer;
    answer.seq = held.input.seq;
    answer.loss = r.loss;
    answer.labelled = r.labelled;
    answer.correct = r.correct;
    return Update(params, nullptr, up, std::move(answer));
  }
  StageBatch out;
  out.seq = held.input.seq;
  out.sequences = held.input.sequences;
  out.steps = held.input.steps;
  const LayerRange& range = *slot.range;
  out.values.assign(range.out(),
                    range.out() + int64_t{out.sequences} * out.steps *
                                      range.out_dim());
  out.labels = held.input.labels;
  return down->Send(out);
}

absl::Status StageRunner::Update(absl::Span<float> params, const float* dout,
                                 UpstreamLink* up, StageGrad answer) {
  const absl::Time t0 = clock_->Now();
  InFlight f = std::move(in_flight_.front());
  in_flight_.erase(in_flight_.begin());
  Slot& slot = slots_[f.slot];
  const float* weights =
      slot.weights.empty() ? params.data() : slot.weights.data();
  const int64_t rows = f.input.rows();
  float* din = din_.empty() ? nullptr : din_.data();
  ASGD_RETURN_IF_ERROR(slot.range->Backward(weights, f.input.values.data(),
                                            dout, f.input.sequences,
                                            f.input.steps, dparams_.data(),
                                            din));
  const int64_t din_size = din == nullptr ? 0 : rows * slot.range->in_dim();
  if (!AllFinite(dparams_) ||
      !AllFinite(absl::MakeConstSpan(din_).first(din_size))) {
    return absl::FailedPreconditionError(absl::StrCat(
        "stage ", options_.stage, ": minibatch ", f.input.seq,
        " gave a NaN or Inf gradient (loss ", answer.loss,
        "); it was not applied: lower the learning rate or check the data"));
  }
  ASGD_RETURN_IF_ERROR(updater_->Apply(dparams_, params));
  const int delay = static_cast<int>(updates_ - f.updates_at_forward);
  ++updates_;
  free_slots_.push_back(f.slot);
  ++stats_.minibatches;
  ++stats_.delays[delay];
  stats_.loss_sum += answer.loss * answer.labelled;
  stats_.labelled += answer.labelled;
  stats_.correct += answer.correct;
  const double seconds = absl::ToDoubleSeconds(clock_->Now() - t0);
  stats_.backward_seconds += seconds;
  if (options_.observer != nullptr) options_.observer->OnUpdate(seconds, delay);
  if (options_.slowdown > 1.0) {
    const double idle =
        (f.forward_seconds + seconds) * (options_.slowdown - 1.0);
    clock_->SleepFor(absl::Seconds(idle));
    stats_.idle_seconds += idle;
  }
  answer.seq = f.input.seq;
  answer.values.assign(din_.begin(), din_.begin() + din_size);
  return up->Answer(std::move(answer));
}

absl::Status StageRunner::RunLoop(absl::Span<float> params, UpstreamLink* up,
                                  DownstreamLink* down) {
  if (static_cast<int64_t>(params.size()) != layers().param_count()) {
    return absl::InvalidArgumentError(
        absl::StrCat("stage ", options_.stage, " holds ",
                     layers().param_count(), " parameters, got ",
                     params.size()));
  }
  if (!last_ && down == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        "stage ", options_.stage, " is not the last: it needs a downstream"));
  }
  bool input_done = false;
  while (true) {
    if (!input_done && static_cast<int>(in_flight_.size()) < window_) {
      ASGD_ASSIGN_OR_RETURN(std::optional<StageBatch> in, up->Receive());
      if (!in.has_value()) {
        input_done = true;
        if (down != nullptr) ASGD_RETURN_IF_ERROR(down->SendEnd());
        continue;
      }
      ASGD_RETURN_IF_ERROR(Forward(params, std::move(*in), up, down));
    } else if (!in_flight_.empty()) {
      ASGD_ASSIGN_OR_RETURN(StageGrad g, down->Receive());
      const InFlight& oldest = in_flight_.front();
      const int64_t want =
          oldest.evaluate ? 0 : int64_t{oldest.input.rows()} *
                                    layers().out_dim();
      if (g.seq != oldest.input.seq ||
          static_cast<int64_t>(g.values.size()) != want) {
        return absl::InvalidArgumentError(absl::StrCat(
            "stage ", options_.stage, ": the answer for minibatch ", g.seq,
            " with ", g.values.size(), " values came while minibatch ",
            oldest.input.seq, " (", want, " values) was the oldest"));
      }
      if (oldest.evaluate) {
        in_flight_.erase(in_flight_.begin());
        ++stats_.evaluated;
        ASGD_RETURN_IF_ERROR(up->Answer(std::move(g)));
        continue;
      }
      std::vector<float> dout = std::move(g.values);
      ASGD_RETURN_IF_ERROR(Update(params, dout.data(), up, std::move(g)));
    } else {
      break;
    }
  }
  if (down != nullptr) ASGD_RETURN_IF_ERROR(down->Finish());
  ASGD_RETURN_IF_ERROR(updater_->Finish(params));
  return up->Finish();
}

absl::Status StageRunner::Run(absl::Span<float> params, UpstreamLink* up,
                              DownstreamLink* down) {
  absl::Status s = RunLoop(params, up, down);
  if (first_forward_.has_value()) {
    stats_.seconds = absl::ToDoubleSeconds(clock_->Now() - *first_forward_);
  }
  if (!s.ok()) {
    if (down != nullptr) down->Abort(s);
    up->Abort(s);
  }
  return s;
}

}  // namespace asgd
