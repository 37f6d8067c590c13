#include "worker/pipeline/pipeline_metrics.h"

#include <string>

#include "gtest/gtest.h"
#include "prometheus/registry.h"
#include "prometheus/text_serializer.h"

namespace asgd {
namespace {

bool Has(const std::string& page, const std::string& line) {
  return page.find(line + "\n") != std::string::npos;
}

TEST(PipelineMetricsTest, BusySecondsUpdatesInFlightAndDelay) {
  prometheus::Registry registry;
  PipelineMetrics metrics(registry, 2);
  metrics.OnForward(0.25, 1);
  metrics.OnForward(0.5, 2);
  metrics.OnUpdate(1.0, 1);
  const std::string page =
      prometheus::TextSerializer().Serialize(registry.Collect());
  EXPECT_TRUE(Has(page,
                  "asgd_worker_pipeline_busy_seconds_total{stage=\"2\","
                  "pass=\"forward\"} 0.75"))
      << page;
  EXPECT_TRUE(Has(page,
                  "asgd_worker_pipeline_busy_seconds_total{stage=\"2\","
                  "pass=\"backward\"} 1"));
  EXPECT_TRUE(Has(page, "asgd_worker_pipeline_minibatches_total{stage=\"2\"} 1"));
  EXPECT_TRUE(Has(page, "asgd_worker_pipeline_in_flight{stage=\"2\"} 1"));
  EXPECT_TRUE(Has(page, "asgd_worker_pipeline_delay{stage=\"2\"} 1"));
}

}  // namespace
}  // namespace asgd
