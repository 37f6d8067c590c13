// SecurityOptions: what TLS and token settings a gRPC server or client uses
// (common/grpc_security.h applies them), as a plain struct that code without
// gRPC headers (the mains, option plumbing) can fill.
//
// Thread-safety: a plain value type.
#ifndef ASGD_COMMON_SECURITY_OPTIONS_H_
#define ASGD_COMMON_SECURITY_OPTIONS_H_

#include <string>

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
  // Client: send the token without TLS (in clear text). Off: MakeChannel()
  // refuses a token without tls_ca.
  bool allow_cleartext_token = false;
};

}  // namespace asgd

#endif  // ASGD_COMMON_SECURITY_OPTIONS_H_
