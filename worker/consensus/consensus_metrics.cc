#include "worker/consensus/consensus_metrics.h"

#include "absl/strings/str_cat.h"

namespace asgd {

ConsensusMetrics::ConsensusMetrics(prometheus::Registry& r, int index)
    : distance_(prometheus::BuildGauge()
                    .Name("asgd_worker_consensus_distance")
                    .Help("L2 distance between this worker's model and the "
                          "servers' consensus at its last communication "
                          "(easgd, admm).")
                    .Labels({{"worker", absl::StrCat(index)}})
                    .Register(r)
                    .Add({})) {
  auto& family = prometheus::BuildCounter()
                     .Name("asgd_worker_consensus_rounds_total")
                     .Help("Communications with the servers' consensus, by "
                           "result: applied (by every server), partial, none "
                           "(easgd, admm).")
                     .Labels({{"worker", absl::StrCat(index)}})
                     .Register(r);
  const char* results[] = {"applied", "partial", "none"};
  for (int i = 0; i < 3; ++i) rounds_[i] = &family.Add({{"result", results[i]}});
}

void ConsensusMetrics::OnRound(int servers_applied, int servers,
                               double distance) {
  distance_.Set(distance);
  const int result =
      servers_applied == servers ? 0 : (servers_applied > 0 ? 1 : 2);
  rounds_[result]->Increment();
}

}  // namespace asgd
