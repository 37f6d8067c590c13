// MetricsEndpoint: serves a Prometheus registry over HTTP at /metrics (one
// prometheus-cpp Exposer per process), read-only.
//
// The HTTP server (civetweb) gives each connection a thread; a connection
// that sends half a request and waits would hold its thread for civetweb's
// default 30 s. Here there are kMetricsThreads threads and every read or
// write times out after kMetricsRequestTimeoutMs, so idle or half-sent
// connections delay a scrape by at most that, and only when they outnumber
// the threads.
//
//   auto registry = std::make_shared<prometheus::Registry>();
//   AddBuildInfo(*registry, "server");
//   auto endpoint = MetricsEndpoint::Start("0.0.0.0", 9100, registry);
//
// Thread-safety: immutable after Start(); the registry is thread-safe.
#ifndef ASGD_COMMON_METRICS_ENDPOINT_H_
#define ASGD_COMMON_METRICS_ENDPOINT_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "prometheus/exposer.h"
#include "prometheus/registry.h"

namespace asgd {

// The version reported by asgd_build_info.
inline constexpr char kAsgdVersion[] = "0.1.0";

inline constexpr int kMetricsThreads = 8;
inline constexpr int kMetricsRequestTimeoutMs = 2000;

class MetricsEndpoint {
 public:
  // Port 0 picks a free port (see port()). Unavailable when it cannot bind.
  static absl::StatusOr<std::unique_ptr<MetricsEndpoint>> Start(
      const std::string& host, int port,
      std::shared_ptr<prometheus::Registry> registry);

  int port() const { return port_; }

 private:
  MetricsEndpoint() = default;
  std::unique_ptr<prometheus::Exposer> exposer_;
  int port_ = 0;
};

// Adds asgd_build_info{component, version} = 1.
void AddBuildInfo(prometheus::Registry& registry, const std::string& component);

}  // namespace asgd

#endif  // ASGD_COMMON_METRICS_ENDPOINT_H_
