// AdpsgdAverager: the averaging half of an AD-PSGD step (asgd_worker
// --mode=adpsgd): at step t, if the topology (adpsgd_topology.h) has this
// worker start an exchange, average its PeerModel with that peer's
// (peer_model.h) through a PeerClient.
//
// A slow or dead peer never stops training: an exchange that fails (the
// call's deadline, a peer that is gone) is counted, logged, and that step is
// simply not averaged; the peer is then left alone for a back-off that
// doubles with each consecutive failure (backoff_initial, 2x, 4x, ... up to
// backoff_max) so a dead neighbour costs at most one deadline per back-off,
// and is tried again after it, so a peer that recovers is used again.
//
//   AdpsgdAverager averager(&model, &peers, options, observer);
//   for (uint64_t t = 0; ...; ++t) {
//     ... compute g on a copy of the model ...
//     averager.Step(t);
//     model.ApplyGradient(g, lr);
//   }
//
// Thread-safety: one thread at a time (the training thread, or the
// delay-by-one averaging thread while the training thread waits to join it).
#ifndef ASGD_WORKER_PEER_ADPSGD_H_
#define ASGD_WORKER_PEER_ADPSGD_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "worker/peer/adpsgd_topology.h"
#include "worker/peer/peer_client.h"
#include "worker/peer/peer_model.h"
#include "worker/peer/peer_observer.h"

namespace asgd {

struct AdpsgdOptions {
  Topology topology = Topology::kFixedRing;
  uint64_t topology_seed = 1;  // the same on every worker
  absl::Duration backoff_initial = absl::Milliseconds(500);
  absl::Duration backoff_max = absl::Seconds(30);
};

// Counts of the exchanges a worker was to start.
struct AverageStats {
  int64_t ok = 0;
  int64_t failed = 0;
  int64_t skipped = 0;
  double last_distance = -1;  // L2 model distance at the last exchange
};

class AdpsgdAverager {
 public:
  // All pointers must outlive the averager; `observer` may be null.
  AdpsgdAverager(PeerModel* model, PeerClient* peers,
                 const AdpsgdOptions& options, PeerObserver* observer);

  // The exchange of step `step`, if this worker starts one (nullopt if not).
  std::optional<AverageResult> Step(uint64_t step);

  const AverageStats& stats() const { return stats_; }
  // Log lines about failures and recoveries since the last call.
  std::vector<std::string> TakeLogLines();

 private:
  PeerModel* const model_;
  PeerClient* const peers_;
  const AdpsgdOptions options_;
  PeerObserver* const observer_;
  std::vector<float> sent_, theirs_;
  std::vector<int> failures_;            // consecutive failures, per peer
  std::vector<absl::Time> retry_after_;  // per peer
  AverageStats stats_;
  std::vector<std::string> log_lines_;
};

}  // namespace asgd

#endif  // ASGD_WORKER_PEER_ADPSGD_H_
