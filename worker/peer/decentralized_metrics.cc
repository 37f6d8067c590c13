#include "worker/peer/decentralized_metrics.h"

#include "absl/strings/str_cat.h"

namespace asgd {
namespace {

prometheus::Labels Worker(int index) {
  return {{"worker", absl::StrCat(index)}};
}

}  // namespace

DecentralizedMetrics::DecentralizedMetrics(prometheus::Registry& r, int index)
    : consensus_distance_(
          prometheus::BuildGauge()
              .Name("asgd_worker_consensus_distance")
              .Help("L2 distance between this worker's model and its "
                    "partner's at the last averaging (adpsgd).")
              .Labels(Worker(index))
              .Register(r)
              .Add({})),
      served_(prometheus::BuildCounter()
                  .Name("asgd_worker_peer_averages_served_total")
                  .Help("Averaging exchanges other workers started with this "
                        "one (adpsgd).")
                  .Labels(Worker(index))
                  .Register(r)
                  .Add({})) {
  auto& family = prometheus::BuildCounter()
                     .Name("asgd_worker_peer_averages_total")
                     .Help(
                         "Averaging exchanges this worker was to start, by "
                         "result: ok, failed, skipped (adpsgd).")
                     .Labels(Worker(index))
                     .Register(r);
  const char* results[] = {"ok", "failed", "skipped"};
  for (int i = 0; i < 3; ++i)
    averages_[i] = &family.Add({{"result", results[i]}});
}

void DecentralizedMetrics::OnAverage(AverageResult result, double distance) {
  switch (result) {
    case AverageResult::kOk:
      averages_[0]->Increment();
      consensus_distance_.Set(distance);
      break;
    case AverageResult::kFailed:
      averages_[1]->Increment();
      break;
    case AverageResult::kSkipped:
      averages_[2]->Increment();
      break;
  }
}

void DecentralizedMetrics::OnAverageServed(double distance) {
  served_.Increment();
  consensus_distance_.Set(distance);
}

}  // namespace asgd
