// The pool's ModelDescriptions, checked as a worker's parameter client
// connects: each server against the first one and against what the client
// asks for, and the model and layout they describe.
//
// Thread-safety: pure functions.
#ifndef ASGD_WORKER_PS_POOL_DESCRIPTION_H_
#define ASGD_WORKER_PS_POOL_DESCRIPTION_H_

#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/model_layout.h"
#include "common/wire_codec.h"
#include "model/model_spec.h"
#include "proto/asgd.pb.h"
#include "worker/ps/param_client.h"

namespace asgd {

// FailedPrecondition, naming the server, unless the server at `address`
// (description `d`) belongs to a pool of `num_addresses` servers, serves
// PushStream and PullStream, holds the model of the first server
// (`first_address`, `first`), and accepts options.wire_dtype and
// `push_encoding` (a compressed one in this build's format version).
absl::Status CheckDescription(const std::string& address,
                              const asgd::v1::ModelDescription& d,
                              const std::string& first_address,
                              const asgd::v1::ModelDescription& first,
                              size_t num_addresses,
                              const PoolClientOptions& options,
                              PushEncoding push_encoding);

// The model `d` describes and its layout; FailedPrecondition when this
// build cannot use the model or the layout's tensors or fingerprint are not
// the described ones.
absl::StatusOr<std::pair<ModelSpec, ModelLayout>> PoolModel(
    const asgd::v1::ModelDescription& d);

}  // namespace asgd

#endif  // ASGD_WORKER_PS_POOL_DESCRIPTION_H_
