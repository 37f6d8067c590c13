// WorkerMetrics: the Prometheus metrics of one asgd_worker (names and
// meanings in docs/metrics.md), fed by the trainer's observer hooks. Every
// series is built once in the constructor.
//
// Thread-safety: thread-safe (prometheus-cpp metrics are atomic).
#ifndef ASGD_WORKER_LOOP_WORKER_METRICS_H_
#define ASGD_WORKER_LOOP_WORKER_METRICS_H_

#include <array>

#include "prometheus/counter.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"
#include "worker/loop/loop.h"

namespace asgd {

class WorkerMetrics final : public TrainerObserver {
 public:
  WorkerMetrics(prometheus::Registry& registry, int worker_index);

  void OnStep(const StepReport& step) override;
  void OnPush(const PushReport& push) override;
  void OnHeldoutAccuracy(double accuracy) override;
  void OnRpcRetry() override { retries_.Increment(); }

 private:
  prometheus::Counter& steps_;
  prometheus::Counter& pushes_;
  prometheus::Counter& frames_;
  prometheus::Counter& audio_seconds_;
  std::array<prometheus::Histogram*, 4> phase_;  // data, pull, compute, push
  prometheus::Histogram& staleness_;
  prometheus::Gauge& loss_;
  prometheus::Gauge& accuracy_;
  prometheus::Gauge& heldout_;
  prometheus::Counter& retries_;
};

}  // namespace asgd

#endif  // ASGD_WORKER_LOOP_WORKER_METRICS_H_
