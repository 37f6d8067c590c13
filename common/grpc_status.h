// The one place where absl::Status and grpc::Status are converted.
// The canonical codes are numerically identical in both libraries.
#ifndef ASGD_COMMON_GRPC_STATUS_H_
#define ASGD_COMMON_GRPC_STATUS_H_

#include <string>

#include "absl/status/status.h"
#include "grpcpp/support/status.h"

namespace asgd {

inline grpc::Status ToGrpcStatus(const absl::Status& s) {
  if (s.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(s.code()),
                      std::string(s.message()));
}

inline absl::Status FromGrpcStatus(const grpc::Status& s) {
  if (s.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(s.error_code()),
                      s.error_message());
}

}  // namespace asgd

#endif  // ASGD_COMMON_GRPC_STATUS_H_
