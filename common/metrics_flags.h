// The metrics flags shared by asgd_server and asgd_worker (defined once, in
// metrics_flags.cc): --metrics_port (-1: off, 0: a free port) and
// --metrics_port_file.
#ifndef ASGD_COMMON_METRICS_FLAGS_H_
#define ASGD_COMMON_METRICS_FLAGS_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "common/metrics_endpoint.h"

namespace asgd {

// Serves `registry` on host:--metrics_port and writes the port to
// --metrics_port_file; null when --metrics_port is -1. Unavailable when the
// port cannot be bound.
absl::StatusOr<std::unique_ptr<MetricsEndpoint>> StartMetricsFromFlags(
    const std::string& host, std::shared_ptr<prometheus::Registry> registry);

}  // namespace asgd

#endif  // ASGD_COMMON_METRICS_FLAGS_H_
