#include "server/server_metrics.h"

#include <memory>
#include <string>

#include "gtest/gtest.h"
#include "prometheus/registry.h"
#include "prometheus/text_serializer.h"

namespace asgd {
namespace {

std::string Page(prometheus::Registry& registry) {
  return prometheus::TextSerializer().Serialize(registry.Collect());
}

int CountLines(const std::string& page, const std::string& prefix) {
  int n = 0;
  size_t at = 0;
  while ((at = page.find("\n" + prefix, at)) != std::string::npos) {
    ++n;
    ++at;
  }
  return n;
}

// 20,000 worker ids (an attacker's, or workers that come and go): at most
// max_worker_series labelled series exist, whatever the ids.
TEST(ServerMetricsTest, PerWorkerSeriesStayBoundedWhateverTheIds) {
  prometheus::Registry registry;
  ServerMetricsOptions o;
  o.max_worker_series = 100;
  ServerMetrics metrics(registry, 0, 2, o);
  const std::string empty = Page(registry);
  for (uint64_t id = 0; id < 20000; ++id) metrics.OnPushApplied(id, id + 1);
  EXPECT_EQ(metrics.worker_series(), 100);
  const std::string page = Page(registry);
  EXPECT_EQ(CountLines(page, "asgd_server_worker_last_push_timestamp_seconds{"),
            100);
  // The most recent ones are kept.
  EXPECT_NE(page.find("worker=\"19999\""), std::string::npos);
  EXPECT_EQ(page.find("worker=\"0\""), std::string::npos);
  EXPECT_LT(page.size(), empty.size() + 100 * 200);
}

// A worker that stopped pushing loses its series after the expiry; the
// connected-workers gauge counts the last minute.
TEST(ServerMetricsTest, IdleWorkersSeriesExpire) {
  prometheus::Registry registry;
  absl::Time now = absl::UnixEpoch() + absl::Hours(1000);
  ServerMetricsOptions o;
  o.worker_series_expiry = absl::Minutes(10);
  o.clock = [&] { return now; };
  ServerMetrics metrics(registry, 0, 1, o);
  metrics.OnPushApplied(1, 1);
  metrics.OnPushApplied(2, 2);
  now += absl::Minutes(9);
  metrics.OnPushApplied(2, 3);
  EXPECT_EQ(metrics.worker_series(), 2);
  now += absl::Minutes(2);  // worker 1: 11 minutes idle
  metrics.OnPushApplied(3, 4);
  EXPECT_EQ(metrics.worker_series(), 2);
  const std::string page = Page(registry);
  EXPECT_EQ(page.find("worker=\"1\""), std::string::npos);
  EXPECT_NE(page.find("worker=\"2\""), std::string::npos);
  // Only worker 3 pushed within the last minute.
  EXPECT_NE(page.find("asgd_server_connected_workers{server=\"0\"} 1"),
            std::string::npos)
      << page;
}

TEST(ServerMetricsTest, EveryRejectReasonHasASeries) {
  prometheus::Registry registry;
  ServerMetrics metrics(registry, 3, 1);
  for (const char* reason : {"nonfinite_update", "push_memory", "peer_limit",
                             "stalled", "busy", "future_version"}) {
    EXPECT_NE(Page(registry).find(std::string("reason=\"") + reason + "\""),
              std::string::npos)
        << reason;
  }
  metrics.OnPushRejected(RejectReason::kStalled);
  metrics.OnDcBackupMiss();
  const std::string page = Page(registry);
  EXPECT_NE(page.find("asgd_server_pushes_dropped_total{server=\"3\",reason="
                      "\"stalled\"} 1"),
            std::string::npos)
      << page;
  EXPECT_NE(page.find("asgd_server_dc_backup_misses_total{server=\"3\"} 1"),
            std::string::npos);
}

}  // namespace
}  // namespace asgd
