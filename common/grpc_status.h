// The one place where absl::Status and grpc::Status are converted.
// The canonical codes are numerically identical in both libraries. A refusal
// (common/refusal.h) travels as the trailing metadata "asgd-refusal": the
// server side adds it from the absl::Status payload, the client side turns it
// back into one.
#ifndef ASGD_COMMON_GRPC_STATUS_H_
#define ASGD_COMMON_GRPC_STATUS_H_

#include <string>

#include "absl/status/status.h"
#include "common/refusal.h"
#include "grpcpp/client_context.h"
#include "grpcpp/server_context.h"
#include "grpcpp/support/status.h"

namespace asgd {

inline grpc::Status ToGrpcStatus(const absl::Status& s) {
  if (s.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(s.code()),
                      std::string(s.message()));
}

// As above, and a refusal in `s` becomes trailing metadata of the call.
inline grpc::Status ToGrpcStatus(const absl::Status& s,
                                 grpc::ServerContextBase* context) {
  const Refusal refusal = RefusalOf(s);
  if (refusal != Refusal::kNone && context != nullptr) {
    context->AddTrailingMetadata(kRefusalMetadataKey,
                                 std::string(RefusalName(refusal)));
  }
  return ToGrpcStatus(s);
}

inline absl::Status FromGrpcStatus(const grpc::Status& s) {
  if (s.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(s.error_code()),
                      s.error_message());
}

// As above, with the refusal the server sent in `context`'s trailers (read
// after the call finished).
inline absl::Status FromGrpcStatus(const grpc::Status& s,
                                   const grpc::ClientContext& context) {
  absl::Status status = FromGrpcStatus(s);
  if (status.ok()) return status;
  const auto& trailers = context.GetServerTrailingMetadata();
  const auto it = trailers.find(kRefusalMetadataKey);
  if (it == trailers.end()) return status;
  return WithRefusal(
      std::move(status),
      ParseRefusal(absl::string_view(it->second.data(), it->second.size())));
}

}  // namespace asgd

#endif  // ASGD_COMMON_GRPC_STATUS_H_
