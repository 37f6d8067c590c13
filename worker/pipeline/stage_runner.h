// StageRunner: one stage of a pipeline (pipelined back-propagation): the
// layers a StagePlan gives it (model/layer_range.h), their weights (local
// to the stage), and the schedule that streams minibatches through.
//
// The schedule, one-forward-one-backward with a window: stage s of S keeps
// at most K_s = max(1, depth - s) minibatches in flight (forward pass done,
// update not yet), `depth` in [1, S] being stage 0's window. It runs
// forward passes until K_s are in flight, then alternates: the backward
// pass and the update of the oldest, then the forward pass of the next.
// So the stage updates before its next forward pass, and its forward pass
// of a minibatch sees the weights K_s - 1 updates before the one that
// applies that minibatch's gradient: the delay, max(0, depth - 1 - s),
// growing toward the input (StagePlan::Delay at depth S; none at depth 1,
// where the run is plain SGD: the same gradients as one process, bit for
// bit). The last stage computes the loss and updates at once.
//
// Each in-flight minibatch has its own LayerRange (the activations) and,
// with a delay, its own copy of the weights its forward pass used
// (weight stashing): its backward pass computes the exact gradient of the
// model it saw, and the update applies it to the current weights
// (StageUpdater; by default w -= learning_rate * g).
//
// Back-pressure: a stage takes a new minibatch from its upstream only when
// it has room (fewer than K_s in flight), so a stage never holds more.
//
// Evaluation minibatches (StageBatch::evaluate: held-out data) take the
// same path and window without updating anything: each stage's forward
// pass with its current weights (in a LayerRange of their own), the last
// stage's loss and counts sent back. While one is in flight a training
// minibatch's delay can be smaller than K_s - 1, never larger.
//
//   auto runner = StageRunner::Create(options);
//   absl::Status s = (*runner)->Run(absl::MakeSpan(stage_params), &up, down);
//
// Thread-safety: one thread; Run once.
#ifndef ASGD_WORKER_PIPELINE_STAGE_RUNNER_H_
#define ASGD_WORKER_PIPELINE_STAGE_RUNNER_H_

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "model/layer_range.h"
#include "model/model_spec.h"
#include "worker/loop/clock.h"
#include "worker/pipeline/stage_link.h"
#include "worker/pipeline/stage_plan.h"

namespace asgd {

// Where a stage's updates go: its own weights only (pure pipelined
// back-propagation: LocalSgd below), or the parameter servers as well
// (pipeline_worker.h). Called on the stage's thread.
class StageUpdater {
 public:
  virtual ~StageUpdater() = default;
  // Applies `grad`, the gradient of the stage's layers, to `params` (the
  // stage's weights, which its next forward pass uses).
  virtual absl::Status Apply(absl::Span<const float> grad,
                             absl::Span<float> params) = 0;
  // After the stage's last update and once every later stage has finished
  // (so later stages finish first), before the earlier stage learns this
  // one is done.
  virtual absl::Status Finish(absl::Span<const float> params) = 0;
};

// Plain SGD on the stage's own weights: params -= learning_rate * grad.
class LocalSgd final : public StageUpdater {
 public:
  explicit LocalSgd(float learning_rate) : learning_rate_(learning_rate) {}
  absl::Status Apply(absl::Span<const float> grad,
                     absl::Span<float> params) override;
  absl::Status Finish(absl::Span<const float>) override {
    return absl::OkStatus();
  }

 private:
  const float learning_rate_;
};

// Monitoring hooks, called on the stage's thread.
class StageObserver {
 public:
  virtual ~StageObserver() = default;
  // A forward pass took `seconds`; `in_flight` minibatches are now held.
  virtual void OnForward(double seconds, int in_flight) = 0;
  // A backward pass and update took `seconds`; the update came `delay`
  // updates after the weights its forward pass used.
  virtual void OnUpdate(double seconds, int delay) = 0;
};

struct StageRunnerOptions {
  ModelSpec spec;
  StagePlan plan;
  int stage = 0;
  int depth = 1;  // stage 0's window, in [1, plan.stages()]
  float learning_rate = 0.0f;
  int max_rows = 0;  // the most rows of a minibatch
  // > 1 makes a straggler stage on purpose: after each update the stage
  // idles (slowdown - 1) times the minibatch's forward and backward time.
  double slowdown = 1.0;
  // Makes the stage's layer ranges (one per minibatch in flight and one
  // for evaluations); null: the CPU's (CreateCpuLayerRange). A device's
  // ranges: model/backend_factory.h.
  LayerRangeFactory range_factory;
  // Null: LocalSgd(learning_rate), owned by the runner.
  StageUpdater* updater = nullptr;
  StageObserver* observer = nullptr;  // may be null
  Clock* clock = nullptr;             // null: RealClock()
};

// K_s above: the most minibatches stage `stage` holds at `depth`.
int StageWindow(int depth, int stage);

struct StageStats {
  int64_t minibatches = 0;  // updates applied
  int64_t evaluated = 0;    // evaluation minibatches passed through
  std::map<int, int64_t> delays;  // delay -> updates with it
  int max_in_flight = 0;
  double forward_seconds = 0, backward_seconds = 0;
  double idle_seconds = 0;  // the slowdown's
  double seconds = 0;  // from the first forward pass to the end of Run
  // What the answers carried (the last stage's measurements, passed down
  // to every stage): sum of loss × labelled, labelled and correct outputs.
  double loss_sum = 0;
  int64_t labelled = 0, correct = 0;
};

class StageRunner {
 public:
  // InvalidArgument for a stage outside the plan, a depth outside
  // [1, stages], a learning rate that is not > 0 and finite, a slowdown
  // below 1, max_rows < 1,
  // or a layer range the spec refuses.
  static absl::StatusOr<std::unique_ptr<StageRunner>> Create(
      const StageRunnerOptions& options);

  const LayerRange& layers() const { return *slots_.front().range; }
  // Replaces the updater (before Run; must outlive it).
  void set_updater(StageUpdater* updater) { updater_ = updater; }
  int window() const { return window_; }
  bool last() const { return last_; }

  // Trains `params` (the stage's part of the flat model, layers().
  // param_count() floats) on everything `up` sends, sending to `down` (null
  // for the last stage, required otherwise). Returns when the upstream has
  // ended and every minibatch is answered, after finishing the downstream,
  // the updater and the upstream, in that order.
  // On an error (a link's, a non-finite gradient: FailedPrecondition, a
  // minibatch of the wrong shape: InvalidArgument, a device range's) aborts
  // both links with it and returns it; params then hold every update
  // applied before.
  absl::Status Run(absl::Span<float> params, UpstreamLink* up,
                   DownstreamLink* down);

  const StageStats& stats() const { return stats_; }

 private:
  struct Slot {
    std::unique_ptr<LayerRange> range;
    std::vector<float> weights;  // the stashed weights (delay > 0)
  };
  struct InFlight {
    int slot = 0;
    StageBatch input;
    int64_t updates_at_forward = 0;
    double forward_seconds = 0;
    bool evaluate = false;  // slot unused
  };

  explicit StageRunner(const StageRunnerOptions& options);
  absl::Status RunLoop(absl::Span<float> params, UpstreamLink* up,
                       DownstreamLink* down);
  absl::Status CheckInput(const StageBatch& in) const;
  absl::Status Forward(absl::Span<float> params, StageBatch in,
                       UpstreamLink* up, DownstreamLink* down);
  absl::Status Update(absl::Span<float> params, const float* dout,
                      UpstreamLink* up, StageGrad answer);
  absl::Status ForwardEvaluate(absl::Span<float> params, StageBatch in,
                               UpstreamLink* up, DownstreamLink* down);

  const StageRunnerOptions options_;
  Clock* const clock_;
  int window_ = 1;
  bool last_ = false;
  std::vector<Slot> slots_;
  std::unique_ptr<LayerRange> eval_range_;
  std::unique_ptr<LocalSgd> local_sgd_;  // when options_.updater is null
  StageUpdater* updater_ = nullptr;
  std::vector<int> free_slots_;
  std::vector<InFlight> in_flight_;  // oldest first
  std::vector<float> dparams_, din_;
  int64_t updates_ = 0;
  std::optional<absl::Time> first_forward_;
  StageStats stats_;
};

}  // namespace asgd

#endif  // ASGD_WORKER_PIPELINE_STAGE_RUNNER_H_
