// PipelineMetrics: the Prometheus metrics a pipeline stage (asgd_worker
// --mode=pipeline) exports, next to WorkerMetrics (which stage 0 feeds with
// its training steps as the other modes do):
//
//   asgd_worker_pipeline_busy_seconds_total{stage,pass} counter: seconds
//       computing, pass = forward or backward (backward includes the
//       update); its rate is the stage's utilization
//   asgd_worker_pipeline_minibatches_total{stage}    counter: updates
//   asgd_worker_pipeline_in_flight{stage}            gauge: minibatches
//       held (forward done, update not yet)
//   asgd_worker_pipeline_delay{stage}                gauge: the delay of
//       the last update (updates between the weights its forward pass
//       used and it)
//
// Every series is built once in the constructor.
// Thread-safety: thread-safe (prometheus-cpp metrics are atomic).
#ifndef ASGD_WORKER_PIPELINE_PIPELINE_METRICS_H_
#define ASGD_WORKER_PIPELINE_PIPELINE_METRICS_H_

#include "prometheus/counter.h"
#include "prometheus/gauge.h"
#include "prometheus/registry.h"
#include "worker/pipeline/stage_runner.h"

namespace asgd {

class PipelineMetrics final : public StageObserver {
 public:
  PipelineMetrics(prometheus::Registry& registry, int stage);

  void OnForward(double seconds, int in_flight) override;
  void OnUpdate(double seconds, int delay) override;

 private:
  prometheus::Counter& forward_;
  prometheus::Counter& backward_;
  prometheus::Counter& minibatches_;
  prometheus::Gauge& in_flight_;
  prometheus::Gauge& delay_;
};

}  // namespace asgd

#endif  // ASGD_WORKER_PIPELINE_PIPELINE_METRICS_H_
