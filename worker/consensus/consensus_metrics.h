// ConsensusMetrics: the Prometheus metrics the consensus modes (easgd,
// admm) add to a worker's (next to WorkerMetrics, which the consensus
// trainer feeds through TrainerObserver as the other modes do):
//
//   asgd_worker_consensus_distance{worker}           gauge: L2 distance
//       between this worker's model and the servers' consensus at its last
//       communication (the series adpsgd exports for its peers)
//   asgd_worker_consensus_rounds_total{worker,result} counter:
//       communications, by result: applied (every server applied its part
//       of the push), partial (some did), none (no server did: dropped as
//       stale, refused or lost)
//
// Every series is built once in the constructor.
// Thread-safety: thread-safe (prometheus-cpp metrics are atomic).
#ifndef ASGD_WORKER_CONSENSUS_CONSENSUS_METRICS_H_
#define ASGD_WORKER_CONSENSUS_CONSENSUS_METRICS_H_

#include <array>

#include "prometheus/counter.h"
#include "prometheus/gauge.h"
#include "prometheus/registry.h"
#include "worker/consensus/consensus_trainer.h"

namespace asgd {

class ConsensusMetrics final : public ConsensusObserver {
 public:
  ConsensusMetrics(prometheus::Registry& registry, int worker_index);

  void OnRound(int servers_applied, int servers, double distance) override;

 private:
  prometheus::Gauge& distance_;
  std::array<prometheus::Counter*, 3> rounds_;  // applied, partial, none
};

}  // namespace asgd

#endif  // ASGD_WORKER_CONSENSUS_CONSENSUS_METRICS_H_
