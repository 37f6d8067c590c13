// The transport-security flags shared by asgd_server, asgd_worker and
// asgd_eval (defined once, in security_flags.cc):
//   --tls_cert, --tls_key, --tls_ca, --require_client_cert,
//   --tls_server_name, --auth_token_file, --allow_cleartext_token
// See common/grpc_security.h for what they mean on each side.
#ifndef ASGD_COMMON_SECURITY_FLAGS_H_
#define ASGD_COMMON_SECURITY_FLAGS_H_

#include "absl/status/statusor.h"
#include "common/security_options.h"

namespace asgd {

// The options the flags ask for; reads --auth_token_file. InvalidArgument
// with the reason for an unreadable token file.
absl::StatusOr<SecurityOptions> SecurityOptionsFromFlags();

}  // namespace asgd

#endif  // ASGD_COMMON_SECURITY_FLAGS_H_
