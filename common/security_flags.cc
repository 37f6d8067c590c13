#include "common/security_flags.h"

#include <string>

#include "absl/flags/flag.h"
#include "common/grpc_security.h"

ABSL_FLAG(std::string, tls_cert, "",
          "PEM certificate chain: the server's (turns TLS on), or the "
          "client's for mutual TLS.");
ABSL_FLAG(std::string, tls_key, "", "PEM private key of --tls_cert.");
ABSL_FLAG(std::string, tls_ca, "",
          "PEM CA certificate. Server: verifies client certificates (with "
          "--require_client_cert). Client: verifies the server (turns TLS on).");
ABSL_FLAG(bool, require_client_cert, false,
          "Server: mutual TLS, refuse clients without a certificate signed "
          "by --tls_ca.");
ABSL_FLAG(std::string, tls_server_name, "",
          "Client: the name expected in the server's certificate, if not the "
          "host name.");
ABSL_FLAG(std::string, auth_token_file, "",
          "File holding a shared bearer token. Server: every call must carry "
          "it (else UNAUTHENTICATED). Client: sent with every call.");
ABSL_FLAG(bool, allow_cleartext_token, false,
          "Client: send the --auth_token_file token without TLS, in clear "
          "text (a trusted network only). Without it a client with a token "
          "and no --tls_ca refuses to start.");

namespace asgd {

absl::StatusOr<SecurityOptions> SecurityOptionsFromFlags() {
  SecurityOptions o;
  o.tls_cert = absl::GetFlag(FLAGS_tls_cert);
  o.tls_key = absl::GetFlag(FLAGS_tls_key);
  o.tls_ca = absl::GetFlag(FLAGS_tls_ca);
  o.require_client_cert = absl::GetFlag(FLAGS_require_client_cert);
  o.tls_server_name = absl::GetFlag(FLAGS_tls_server_name);
  o.allow_cleartext_token = absl::GetFlag(FLAGS_allow_cleartext_token);
  if (const std::string path = absl::GetFlag(FLAGS_auth_token_file);
      !path.empty()) {
    auto token = ReadTokenFile(path);
    if (!token.ok()) return token.status();
    o.token = *token;
  }
  return o;
}

}  // namespace asgd
