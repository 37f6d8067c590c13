// MetricsEndpoint: serves a Prometheus registry over HTTP at /metrics,
// read-only, in the Prometheus text format (Content-Type
// "text/plain; version=0.0.4; charset=utf-8"). GET and HEAD of /metrics only;
// any other path is 404, any other method 405. The page ends with the
// process's own gauges (asgd_process_*: memory, threads, open files), read
// at each scrape.
//
// The HTTP server is libmicrohttpd with one internal thread on epoll: a
// connection holds no thread, only a file descriptor and a little memory, so
// idle or half-sent connections cannot delay a scrape, however many there
// are. They are bounded instead:
//  * a connection with no traffic for kMetricsIdleTimeoutS seconds is closed;
//  * at most kMetricsConnectionsPerAddress connections from one client IP
//    address and kMetricsMaxConnections in all; past either, a new
//    connection is closed at once (the scrape fails fast, it never waits).
// So a client that opens many connections uses up its own address's share
// and delays nobody; a scrape from another address still answers at once.
// Serializing the registry runs on the server thread: a scrape costs what
// the registry holds, not what other clients do.
//
//   auto registry = std::make_shared<prometheus::Registry>();
//   AddBuildInfo(*registry, "server");
//   auto endpoint = MetricsEndpoint::Start("0.0.0.0", 9100, registry);
//
// Thread-safety: immutable after Start(); the registry is thread-safe. The
// destructor stops the server (open connections are closed) and returns at
// once.
#ifndef ASGD_COMMON_METRICS_ENDPOINT_H_
#define ASGD_COMMON_METRICS_ENDPOINT_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "common/process_stats.h"
#include "prometheus/registry.h"

struct MHD_Daemon;

namespace asgd {

// The version reported by asgd_build_info.
inline constexpr char kAsgdVersion[] = "0.1.0";

inline constexpr int kMetricsIdleTimeoutS = 10;
inline constexpr int kMetricsMaxConnections = 512;
inline constexpr int kMetricsConnectionsPerAddress = 128;

// The Content-Type of the /metrics page.
inline constexpr char kMetricsContentType[] =
    "text/plain; version=0.0.4; charset=utf-8";

class MetricsEndpoint {
 public:
  // `host` is a numeric address or a name (e.g. "0.0.0.0", "::",
  // "localhost"; the first address it resolves to). Port 0 picks a free port
  // (see port()). Unavailable when it cannot bind.
  static absl::StatusOr<std::unique_ptr<MetricsEndpoint>> Start(
      const std::string& host, int port,
      std::shared_ptr<prometheus::Registry> registry);
  ~MetricsEndpoint();

  MetricsEndpoint(const MetricsEndpoint&) = delete;
  MetricsEndpoint& operator=(const MetricsEndpoint&) = delete;

  int port() const { return port_; }

 private:
  explicit MetricsEndpoint(std::shared_ptr<prometheus::Registry> registry);

  const std::shared_ptr<prometheus::Registry> registry_;
  MHD_Daemon* daemon_ = nullptr;
  int port_ = 0;
};

// The registry's metrics as a /metrics page (the Prometheus text format).
std::string SerializeMetrics(const prometheus::Registry& registry);

// The process's own gauges in the same format: asgd_process_resident_bytes,
// asgd_process_heap_in_use_bytes, asgd_process_heap_free_bytes,
// asgd_process_threads and asgd_process_open_fds (common/process_stats.h;
// a figure not known, -1, is left out). The endpoint serves them after the
// registry's metrics, read at each scrape.
std::string SerializeProcessStats(const ProcessStats& stats);

// Adds asgd_build_info{component, version} = 1.
void AddBuildInfo(prometheus::Registry& registry, const std::string& component);

}  // namespace asgd

#endif  // ASGD_COMMON_METRICS_ENDPOINT_H_
