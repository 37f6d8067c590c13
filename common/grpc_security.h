// Transport security for asgd's gRPC: TLS (server certificate, optional
// mutual TLS with client certificates) and a shared bearer token checked on
// every call. Both are off by default (the local demo); deployments turn them
// on with flags (see docs/security.md).
//
// Server side: MakeServerCredentials() gives the listening credentials. When
// a token is set they carry a check that runs in gRPC's server auth filter,
// before any handler or interceptor: a call without exactly
// "authorization: Bearer <token>" metadata fails with UNAUTHENTICATED and its
// handler never runs (unary and streaming calls alike, with or without TLS).
// Exempt: the gRPC health service (grpc.health.v1.Health/Check and /Watch),
// so that container probes need no secret; everything else (the
// asgd.v1.ParameterServer service, server reflection) needs the token.
// MakeServerInterceptors() adds nothing today and is kept so that servers
// have one place to ask for interceptors.
//
// Client side: MakeChannel() builds a channel that carries TLS and the token
// in every configuration. MakeChannelCredentials() gives TLS channel
// credentials with the token attached as call credentials; gRPC sends call
// credentials only over TLS, so a token without TLS needs MakeChannel().
//
// Token-only (no TLS) is accepted for trusted private networks, where the
// token travels in clear text: a client refuses to send it that way unless
// allow_cleartext_token says so explicitly (--allow_cleartext_token).
//
// Thread-safety: pure functions; the returned objects are thread-safe.
//
// gRPC version: built against Debian's gRPC 1.51. The token check on a server
// without TLS uses core credentials through grpc::ServerCredentials' virtual
// AddPortToServer, which later gRPC versions change; a newer gRPC fails to
// compile grpc_security.cc rather than silently dropping the check.
#ifndef ASGD_COMMON_GRPC_SECURITY_H_
#define ASGD_COMMON_GRPC_SECURITY_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/security_options.h"
#include "grpcpp/channel.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/support/channel_arguments.h"
#include "grpcpp/support/server_interceptor.h"

namespace asgd {

// Server credentials: insecure when tls_cert is empty, else TLS with
// tls_cert/tls_key (and, with require_client_cert, client certificates that
// tls_ca must have signed). With a token, the token check described above.
// InvalidArgument naming the file for an unreadable or empty PEM file, and
// for inconsistent settings (a key without a certificate, mutual TLS without
// TLS or without tls_ca, tls_ca without tls_cert).
absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> MakeServerCredentials(
    const SecurityOptions& options);

// What a worker's own service (the decentralized modes' peer service, a
// pipeline stage's service) serves with, from the worker's client settings:
// TLS with tls_cert/tls_key when set (client certificates required, against
// tls_ca, with require_client_cert), and the bearer token when set.
SecurityOptions WorkerServiceSecurity(const SecurityOptions& worker);

// Server interceptors for `options`: none (the token is checked by the
// credentials from MakeServerCredentials(), which every server must use).
std::vector<
    std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>>
MakeServerInterceptors(const SecurityOptions& options);

// Client credentials: insecure when tls_ca is empty, else TLS verifying the
// server against tls_ca, with tls_cert/tls_key as the client certificate
// when set (mutual TLS) and the token as call credentials (sent only over
// TLS). The caller applies tls_server_name (SslTargetNameOverride), or uses
// MakeChannel(). InvalidArgument for unreadable files, inconsistent settings,
// and a token without TLS (use MakeChannel()).
absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>>
MakeChannelCredentials(const SecurityOptions& options);

// A channel to `address` with everything `options` asks for: TLS credentials,
// tls_server_name as the expected certificate name, and the token on every
// call (as call credentials over TLS, through a client interceptor without
// TLS). `args` are used as given otherwise. Errors as MakeChannelCredentials
// except that a token without TLS is allowed when allow_cleartext_token is
// set (InvalidArgument naming both ways out otherwise).
//
//   ASGD_ASSIGN_OR_RETURN(auto channel, MakeChannel(address, security, args));
//   auto stub = asgd::v1::ParameterServer::NewStub(channel);
absl::StatusOr<std::shared_ptr<grpc::Channel>> MakeChannel(
    const std::string& address, const SecurityOptions& options,
    const grpc::ChannelArguments& args);

// Reads a token file (surrounding whitespace stripped). InvalidArgument
// naming the path when it cannot be read, is empty, or holds characters that
// cannot travel in a gRPC header (only printable ASCII is allowed).
absl::StatusOr<std::string> ReadTokenFile(const std::string& path);

}  // namespace asgd

#endif  // ASGD_COMMON_GRPC_SECURITY_H_
