#include "worker/consensus/consensus_metrics.h"

#include <string>

#include "gtest/gtest.h"
#include "prometheus/registry.h"
#include "prometheus/text_serializer.h"

namespace asgd {
namespace {

std::string Page(prometheus::Registry& registry) {
  return prometheus::TextSerializer().Serialize(registry.Collect());
}

bool Has(const std::string& page, const std::string& line) {
  return page.find(line + "\n") != std::string::npos;
}

TEST(ConsensusMetricsTest, RoundsByResultAndTheLastDistance) {
  prometheus::Registry registry;
  ConsensusMetrics metrics(registry, 3);
  metrics.OnRound(2, 2, 0.5);
  metrics.OnRound(2, 2, 0.25);
  metrics.OnRound(1, 2, 0.75);
  metrics.OnRound(0, 2, 1.5);
  const std::string page = Page(registry);
  EXPECT_TRUE(Has(page, "asgd_worker_consensus_distance{worker=\"3\"} 1.5"))
      << page;
  EXPECT_TRUE(Has(page,
                  "asgd_worker_consensus_rounds_total{worker=\"3\","
                  "result=\"applied\"} 2"))
      << page;
  EXPECT_TRUE(Has(page,
                  "asgd_worker_consensus_rounds_total{worker=\"3\","
                  "result=\"partial\"} 1"));
  EXPECT_TRUE(Has(page,
                  "asgd_worker_consensus_rounds_total{worker=\"3\","
                  "result=\"none\"} 1"));
}

}  // namespace
}  // namespace asgd
