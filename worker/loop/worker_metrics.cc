#include "worker/loop/worker_metrics.h"

#include "absl/strings/str_cat.h"

namespace asgd {
namespace {

using prometheus::BuildCounter;
using prometheus::BuildGauge;
using prometheus::BuildHistogram;

constexpr double kSecondsPerFrame = 0.01;  // 10 ms hop

prometheus::Labels Worker(int index) {
  return {{"worker", absl::StrCat(index)}};
}

}  // namespace

WorkerMetrics::WorkerMetrics(prometheus::Registry& r, int index)
    : steps_(BuildCounter().Name("asgd_worker_steps_total")
                 .Help("Training steps (minibatches computed).")
                 .Labels(Worker(index)).Register(r).Add({})),
      pushes_(BuildCounter().Name("asgd_worker_pushes_total")
                  .Help("Pushes sent.").Labels(Worker(index)).Register(r).Add({})),
      frames_(BuildCounter().Name("asgd_worker_frames_total")
                  .Help("Frames processed.").Labels(Worker(index)).Register(r).Add({})),
      audio_seconds_(BuildCounter().Name("asgd_worker_audio_seconds_total")
                         .Help("Seconds of audio processed (frames x 10 ms).")
                         .Labels(Worker(index)).Register(r).Add({})),
      staleness_(BuildHistogram().Name("asgd_worker_push_staleness")
                     .Help("Staleness the servers reported for this worker's pushes.")
                     .Labels(Worker(index)).Register(r)
                     .Add({}, prometheus::Histogram::BucketBoundaries{
                                  0, 1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 64, 128})),
      loss_(BuildGauge().Name("asgd_worker_loss")
                .Help("Mean cross-entropy of the last minibatch.")
                .Labels(Worker(index)).Register(r).Add({})),
      accuracy_(BuildGauge().Name("asgd_worker_frame_accuracy")
                    .Help("Frame accuracy of the last training minibatch.")
                    .Labels(Worker(index)).Register(r).Add({})),
      heldout_(BuildGauge().Name("asgd_worker_heldout_accuracy")
                   .Help("Last held-out frame accuracy.")
                   .Labels(Worker(index)).Register(r).Add({})),
      retries_(BuildCounter().Name("asgd_worker_rpc_retries_total")
                   .Help("Pulls and pushes retried after an error.")
                   .Labels(Worker(index)).Register(r).Add({})) {
  auto& family = BuildHistogram()
                     .Name("asgd_worker_step_phase_seconds")
                     .Help("Time per step in each phase.")
                     .Labels(Worker(index))
                     .Register(r);
  const char* names[] = {"data", "pull", "compute", "push"};
  for (int i = 0; i < 4; ++i) {
    phase_[i] = &family.Add({{"phase", names[i]}},
                            prometheus::Histogram::BucketBoundaries{
                                1e-4, 3e-4, 1e-3, 3e-3, 0.01, 0.03, 0.1, 0.3,
                                1, 3});
  }
}

void WorkerMetrics::OnStep(const StepReport& step) {
  steps_.Increment();
  frames_.Increment(step.frames);
  audio_seconds_.Increment(step.frames * kSecondsPerFrame);
  phase_[0]->Observe(step.data_seconds);
  phase_[1]->Observe(step.pull_seconds);
  phase_[2]->Observe(step.compute_seconds);
  phase_[3]->Observe(step.push_seconds);
  loss_.Set(step.loss);
  if (step.labelled > 0) {
    accuracy_.Set(static_cast<double>(step.correct) / step.labelled);
  }
}

void WorkerMetrics::OnPush(const PushReport& push) {
  pushes_.Increment();
  staleness_.Observe(static_cast<double>(push.max_staleness));
}

void WorkerMetrics::OnHeldoutAccuracy(double accuracy) { heldout_.Set(accuracy); }

}  // namespace asgd
