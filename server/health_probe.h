// A gRPC health check client (grpc.health.v1.Health/Check), for container
// health probes: `asgd_server --health_probe=HOST:PORT`.
//
// Thread-safety: reentrant.
#ifndef ASGD_SERVER_HEALTH_PROBE_H_
#define ASGD_SERVER_HEALTH_PROBE_H_

#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace asgd {

// OK when the server at `address` answers SERVING for the overall health
// (empty service name) within `timeout`; Unavailable (or the call's error)
// with a readable message otherwise.
absl::Status ProbeHealth(const std::string& address, absl::Duration timeout);

}  // namespace asgd

#endif  // ASGD_SERVER_HEALTH_PROBE_H_
