#include "common/metrics_flags.h"

#include <utility>

#include "absl/flags/flag.h"
#include "common/cli.h"

ABSL_FLAG(int, metrics_port, -1,
          "Serve Prometheus metrics at http://<host>:<port>/metrics; 0 picks a "
          "free port (printed, and written to --metrics_port_file); -1: off.");
ABSL_FLAG(std::string, metrics_port_file, "",
          "If set, write the metrics port to this file once serving.");

namespace asgd {

absl::StatusOr<std::unique_ptr<MetricsEndpoint>> StartMetricsFromFlags(
    const std::string& host, std::shared_ptr<prometheus::Registry> registry) {
  const int port = absl::GetFlag(FLAGS_metrics_port);
  if (port < 0) return std::unique_ptr<MetricsEndpoint>();
  auto endpoint = MetricsEndpoint::Start(host, port, std::move(registry));
  if (!endpoint.ok()) return endpoint.status();
  WritePortFile(absl::GetFlag(FLAGS_metrics_port_file), (*endpoint)->port());
  return endpoint;
}

}  // namespace asgd
