#include "common/grpc_security.h"

#include "absl/status/status.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/security/server_credentials.h"

namespace asgd {

// Insecure only for now; TLS and token come next.
absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> MakeServerCredentials(
    const SecurityOptions& options) {
  if (!options.tls_cert.empty() || !options.token.empty()) {
    return absl::UnimplementedError("TLS and tokens are not implemented yet");
  }
  return grpc::InsecureServerCredentials();
}

std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>>
MakeServerInterceptors(const SecurityOptions&) {
  return {};
}

absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> MakeChannelCredentials(
    const SecurityOptions& options) {
  if (!options.tls_ca.empty() || !options.token.empty()) {
    return absl::UnimplementedError("TLS and tokens are not implemented yet");
  }
  return grpc::InsecureChannelCredentials();
}

absl::StatusOr<std::string> ReadTokenFile(const std::string& path) {
  return absl::UnimplementedError("tokens are not implemented yet: " + path);
}

}  // namespace asgd
