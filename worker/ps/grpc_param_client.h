// GrpcParamClient: ParamClient over gRPC to a pool of asgd servers.
//
// Create() connects to every address (waiting up to connect_timeout for
// servers that are still starting), asks each for its ModelDescription and
// checks that the pool is consistent: as many servers as addresses, each
// index exactly once, one layout fingerprint and one model spec, whose
// tensors are the layout's. The addresses may be given in
// any order. Pull and Push talk to all servers concurrently, one stream each,
// every call with a deadline. A pull waits (within its deadline) for a server
// that is away to come back, and the channels retry connecting at least
// every half second, so a restarted server is used again within about that
// long. A refusal the server sends (overload) comes back as a Refusal
// payload of the status. Tensor chunks are encoded straight into gRPC
// slices and decoded straight from them (common/tensor_wire.h), as float32 or
// bfloat16 (PoolClientOptions::wire_dtype); each client has its own
// connection per server.
//
// Thread-safety: as ParamClient (the gRPC stubs are thread-safe and the
// client's own state is immutable after Create()).
#ifndef ASGD_WORKER_PS_GRPC_PARAM_CLIENT_H_
#define ASGD_WORKER_PS_GRPC_PARAM_CLIENT_H_

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/grpc_security.h"
#include "common/wire_codec.h"
#include "grpcpp/generic/generic_stub.h"
#include "proto/asgd.grpc.pb.h"
#include "worker/ps/param_client.h"

namespace asgd {

class GrpcParamClient final : public ParamClient {
 public:
  static absl::StatusOr<std::unique_ptr<GrpcParamClient>> Create(
      const std::vector<std::string>& addresses,
      const PoolClientOptions& options);

  const ModelLayout& layout() const override { return layout_; }
  const ModelSpec& model() const override { return model_; }
  const std::map<std::string, std::string>& attributes() const override {
    return attributes_;
  }
  int max_push_minibatches() const override { return max_push_minibatches_; }
  absl::Status Pull(absl::Span<float> params,
                    std::vector<uint64_t>* versions) override;
  absl::StatusOr<PushOutcome> Push(absl::Span<const float> gradient,
                                   const std::vector<uint64_t>& versions,
                                   int num_minibatches,
                                   PushKind kind = PushKind::kGradient) override;
  absl::StatusOr<std::vector<uint64_t>> Versions() override;
  absl::StatusOr<PoolGrant> FetchBatches(uint64_t num_frames, int batch_size,
                                         double epochs, int count) override;

 private:
  GrpcParamClient(PoolClientOptions options, ModelLayout layout,
                  ModelSpec model)
      : options_(options), layout_(std::move(layout)), model_(std::move(model)) {}

  absl::StatusOr<uint64_t> PullFrom(int server, absl::Span<float> params);
  absl::StatusOr<asgd::v1::PushReply> PushTo(int server,
                                             absl::Span<const float> gradient,
                                             uint64_t version,
                                             int num_minibatches,
                                             PushKind kind);

  const PoolClientOptions options_;
  const ModelLayout layout_;
  const ModelSpec model_;
  std::map<std::string, std::string> attributes_;
  int64_t max_chunk_elements_ = 0;  // the pool's chunk limit
  int max_push_minibatches_ = 0;    // the smallest any server reported
  std::vector<std::string> addresses_;  // by server index
  std::vector<std::unique_ptr<asgd::v1::ParameterServer::Stub>> stubs_;
  // The same channels, for the raw Pull and Push methods.
  std::vector<std::unique_ptr<grpc::GenericStub>> raw_stubs_;
};

}  // namespace asgd

#endif  // ASGD_WORKER_PS_GRPC_PARAM_CLIENT_H_
