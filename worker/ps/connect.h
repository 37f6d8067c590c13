// ConnectToPool: a ParamClient for a pool of asgd servers, for code that
// should not see the transport (the mains, tools). The client is the gRPC
// one (grpc_param_client.h); this header includes no gRPC header.
//
//   PoolClientOptions o;
//   o.worker_id = 3;
//   ASGD_ASSIGN_OR_RETURN(auto addresses, ParseServerList("h1:50051,h2:50051"));
//   ASGD_ASSIGN_OR_RETURN(std::unique_ptr<ParamClient> pool,
//                         ConnectToPool(addresses, o));
//
// Thread-safety: reentrant functions.
#ifndef ASGD_WORKER_PS_CONNECT_H_
#define ASGD_WORKER_PS_CONNECT_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "worker/ps/param_client.h"

namespace asgd {

// Connects to every address and checks the pool (see GrpcParamClient).
absl::StatusOr<std::unique_ptr<ParamClient>> ConnectToPool(
    const std::vector<std::string>& addresses, const PoolClientOptions& options);

// Splits "host:port,host:port". InvalidArgument when empty or malformed.
absl::StatusOr<std::vector<std::string>> ParseServerList(
    const std::string& text);

}  // namespace asgd

#endif  // ASGD_WORKER_PS_CONNECT_H_
