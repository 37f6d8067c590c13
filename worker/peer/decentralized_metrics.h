// DecentralizedMetrics: the Prometheus metrics the decentralized modes add to
// a worker's (next to WorkerMetrics, which the decentralized trainer feeds
// through TrainerObserver as in the parameter-server modes):
//
//   asgd_worker_consensus_distance{worker}          gauge: L2 distance
//       between this worker's model and its partner's at the last averaging
//       it started or answered (adpsgd; 0 while none has happened)
//   asgd_worker_peer_averages_total{worker,result}  counter: averaging
//       exchanges this worker was to start; result ok, failed (the call
//       failed: peer gone or deadline) or skipped (peer in its back-off)
//   asgd_worker_peer_averages_served_total{worker}  counter: exchanges other
//       workers started with this one
//
// Every series is built once in the constructor.
// Thread-safety: thread-safe (prometheus-cpp metrics are atomic).
#ifndef ASGD_WORKER_PEER_DECENTRALIZED_METRICS_H_
#define ASGD_WORKER_PEER_DECENTRALIZED_METRICS_H_

#include <array>

#include "prometheus/counter.h"
#include "prometheus/gauge.h"
#include "prometheus/registry.h"
#include "worker/peer/peer_observer.h"

namespace asgd {

class DecentralizedMetrics final : public PeerObserver {
 public:
  DecentralizedMetrics(prometheus::Registry& registry, int worker_index);

  void OnAverage(AverageResult result, double distance) override;
  void OnAverageServed(double distance) override;

 private:
  prometheus::Gauge& consensus_distance_;
  std::array<prometheus::Counter*, 3> averages_;  // ok, failed, skipped
  prometheus::Counter& served_;
};

}  // namespace asgd

#endif  // ASGD_WORKER_PEER_DECENTRALIZED_METRICS_H_
