// PeerObserver: monitoring hooks of the decentralized modes, next to the
// TrainerObserver ones (trainer.h). DecentralizedMetrics
// (decentralized_metrics.h) exports them to Prometheus.
//
// Thread-safety: implementations must be thread-safe: OnAverage runs on the
// training thread or the delay-by-one averaging thread, OnAverageServed on
// the peer service's gRPC threads.
#ifndef ASGD_WORKER_PEER_PEER_OBSERVER_H_
#define ASGD_WORKER_PEER_PEER_OBSERVER_H_

namespace asgd {

// What became of one averaging exchange this worker was to start.
enum class AverageResult {
  kOk,       // both models averaged
  kFailed,   // the call failed (peer gone, deadline): this step not averaged
  kSkipped,  // not tried: the peer failed recently and is in its back-off
};

class PeerObserver {
 public:
  virtual ~PeerObserver() = default;
  // An exchange this worker started. `distance` is the L2 distance between
  // the two models before averaging (kOk only).
  virtual void OnAverage(AverageResult result, double distance) = 0;
  // An exchange another worker started and this one answered.
  virtual void OnAverageServed(double distance) = 0;
};

}  // namespace asgd

#endif  // ASGD_WORKER_PEER_PEER_OBSERVER_H_
