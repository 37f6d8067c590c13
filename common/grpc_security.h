// Transport security for asgd's gRPC: TLS (server certificate, optional
// mutual TLS with client certificates) and a shared bearer token checked on
// every call. Both are off by default (the local demo); deployments turn them
// on with flags (see README "Security").
//
// Server side: MakeServerCredentials() gives the listening credentials and
// MakeServerInterceptors() the interceptors that enforce the token (every
// call without "authorization: Bearer <token>" metadata fails with
// UNAUTHENTICATED before any handler runs).
// Client side: MakeChannelCredentials() gives TLS channel credentials (or
// insecure ones) with the token attached to every call.
//
// Thread-safety: pure functions; the returned objects are thread-safe.
#ifndef ASGD_COMMON_GRPC_SECURITY_H_
#define ASGD_COMMON_GRPC_SECURITY_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/support/server_interceptor.h"

namespace asgd {

struct SecurityOptions {
  // PEM files. Server: its certificate chain and key (TLS on when set);
  // tls_ca: CA that signs client certificates (mutual TLS when
  // require_client_cert). Client: tls_ca verifies the server (TLS on when
  // set); tls_cert/tls_key: its client certificate for mutual TLS.
  std::string tls_cert;
  std::string tls_key;
  std::string tls_ca;
  bool require_client_cert = false;
  // Client: expected name in the server's certificate, if not the host name.
  std::string tls_server_name;
  // Shared bearer token (empty: none). Read from a file by the mains.
  std::string token;
};

// InvalidArgument naming the file for unreadable or inconsistent settings.
absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> MakeServerCredentials(
    const SecurityOptions& options);

// Interceptors enforcing the token (none when no token is set).
std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>>
MakeServerInterceptors(const SecurityOptions& options);

absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> MakeChannelCredentials(
    const SecurityOptions& options);

// Reads a token file (surrounding whitespace stripped). InvalidArgument when
// it cannot be read or is empty.
absl::StatusOr<std::string> ReadTokenFile(const std::string& path);

}  // namespace asgd

#endif  // ASGD_COMMON_GRPC_SECURITY_H_
