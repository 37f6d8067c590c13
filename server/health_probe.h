// A gRPC health check client (grpc.health.v1.Health/Check), for container
// health probes: `asgd_server --health_probe=HOST:PORT` plus the client side
// of the security flags when the server uses TLS (see docs/security.md).
//
// Thread-safety: reentrant.
#ifndef ASGD_SERVER_HEALTH_PROBE_H_
#define ASGD_SERVER_HEALTH_PROBE_H_

#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "common/grpc_security.h"

namespace asgd {

// OK when the server at `address` answers SERVING for the overall health
// (empty service name) within `timeout`; Unavailable (or the call's error)
// with a readable message otherwise. `security` is read as a client's (see
// MakeChannel()): tls_ca to verify a TLS server, tls_cert/tls_key for mutual
// TLS, tls_server_name when the certificate does not name `address`'s host.
// The health service needs no token; one that is set is not sent.
// InvalidArgument for unusable security options.
absl::Status ProbeHealth(const std::string& address, absl::Duration timeout,
                         const SecurityOptions& security = {});

}  // namespace asgd

#endif  // ASGD_SERVER_HEALTH_PROBE_H_
