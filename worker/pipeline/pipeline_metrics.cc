#include "worker/pipeline/pipeline_metrics.h"

#include "absl/strings/str_cat.h"

namespace asgd {
namespace {

prometheus::Family<prometheus::Counter>& BusyFamily(prometheus::Registry& r,
                                                    int stage) {
  return prometheus::BuildCounter()
      .Name("asgd_worker_pipeline_busy_seconds_total")
      .Help("Seconds this pipeline stage spent computing, by pass (forward; "
            "backward with the update). Its rate is the stage's "
            "utilization.")
      .Labels({{"stage", absl::StrCat(stage)}})
      .Register(r);
}

prometheus::Gauge& StageGauge(prometheus::Registry& r, int stage,
                              const char* name, const char* help) {
  return prometheus::BuildGauge()
      .Name(name)
      .Help(help)
      .Labels({{"stage", absl::StrCat(stage)}})
      .Register(r)
      .Add({});
}

}  // namespace

PipelineMetrics::PipelineMetrics(prometheus::Registry& r, int stage)
    : forward_(BusyFamily(r, stage).Add({{"pass", "forward"}})),
      backward_(BusyFamily(r, stage).Add({{"pass", "backward"}})),
      minibatches_(prometheus::BuildCounter()
                       .Name("asgd_worker_pipeline_minibatches_total")
                       .Help("Minibatches this pipeline stage applied.")
                       .Labels({{"stage", absl::StrCat(stage)}})
                       .Register(r)
                       .Add({})),
      in_flight_(StageGauge(
          r, stage, "asgd_worker_pipeline_in_flight",
          "Minibatches this pipeline stage holds: forward pass done, update "
          "not yet.")),
      delay_(StageGauge(
          r, stage, "asgd_worker_pipeline_delay",
          "Updates between the weights a minibatch's forward pass used and "
          "its own update, at this stage's last update.")) {}

void PipelineMetrics::OnForward(double seconds, int in_flight) {
  forward_.Increment(seconds);
  in_flight_.Set(in_flight);
}

void PipelineMetrics::OnUpdate(double seconds, int delay) {
  backward_.Increment(seconds);
  minibatches_.Increment();
  delay_.Set(delay);
  in_flight_.Decrement();
}

}  // namespace asgd
