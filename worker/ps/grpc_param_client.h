// GrpcParamClient: ParamClient over gRPC to a pool of asgd servers.
//
// Create() connects to every address (waiting up to connect_timeout for
// servers that are still starting), asks each for its ModelDescription and
// checks that the pool is consistent: as many servers as addresses, each
// index exactly once, one layout fingerprint and one model spec, whose
// tensors are the layout's, and every server accepting the encodings asked
// for (a compressed push encoding needs every server to list it in
// push_dtypes with this build's compressed format version, else
// FailedPrecondition naming the server). The addresses may be given in any
// order.
//
// Transport. Pull and Push talk to all servers concurrently. When every
// server offers them (ModelDescription.streams) and options.streams is set,
// each server gets one long-lived PushStream and one PullStream, opened on
// first use and reopened after they end, so a push or a pull costs messages
// on an open stream instead of a call each; otherwise every push and pull is
// its own call. Either way every operation has a deadline (rpc_timeout); on
// a stream, an operation that misses it cancels the stream. A pull waits
// (within its deadline) for a server that is away to come back, and the
// channels retry connecting at least every half second, so a restarted
// server is used again within about that long. A stream the server closed
// because it sat idle (it ends with OK) is reopened and the push or pull
// sent again on the new one: nothing of it reached the server. A refusal the
// server sends (overload) comes back as a Refusal payload of the status.
// Tensor chunks are encoded straight into gRPC slices and decoded straight
// from them (common/tensor_wire.h), as float32 or bfloat16
// (PoolClientOptions::wire_dtype) or compressed (push_encoding); each client
// has its own connection per server.
//
// Compressed pushes: one GradEncoder per server keeps that server's
// error-feedback residual; a push a server did not apply (an error, a
// refusal, a stale drop) is restored into that server's residual, never
// resent.
//
// Delta pulls (PoolClientOptions::delta_pulls, on streams with float32
// pulls, from servers with ModelDescription.delta_pulls): the client keeps
// an exact copy of each such server's slice, asks for the updates since it,
// replays them (DeltaReceiver) and copies the slice into the caller's
// buffer; a reply the server sends as plain weights, or any error, leaves
// no exact copy, and the next pull asks for weights again.
//
// Thread-safety: as ParamClient: one Push and one Pull in flight at a time
// (each server's streams and residual are used by one call at a time).
#ifndef ASGD_WORKER_PS_GRPC_PARAM_CLIENT_H_
#define ASGD_WORKER_PS_GRPC_PARAM_CLIENT_H_

#include <atomic>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/chunking.h"
#include "common/grpc_security.h"
#include "common/wire_codec.h"
#include "compression/grad_encoder.h"
#include "grpcpp/generic/generic_stub.h"
#include "proto/asgd.grpc.pb.h"
#include "worker/ps/param_client.h"

namespace asgd {

class ClientStream;

class GrpcParamClient final : public ParamClient {
 public:
  static absl::StatusOr<std::unique_ptr<GrpcParamClient>> Create(
      const std::vector<std::string>& addresses,
      const PoolClientOptions& options);
  ~GrpcParamClient() override;

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
  absl::StatusOr<PoolGrant> FetchBatches(const std::string& run_id,
                                         uint64_t num_frames, int batch_size,
                                         double epochs, int count) override;

  // The encoding gradient pushes use.
  PushEncoding push_encoding() const { return push_encoding_; }
  // True when pushes and pulls travel on long-lived streams.
  bool uses_streams() const { return use_streams_; }
  // Streams opened so far (both kinds, all servers): 2 per server while they
  // stay open.
  int64_t streams_opened() const;
  // Tensor data bytes of the push chunks written so far (all servers).
  int64_t push_bytes_sent() const { return push_bytes_.load(); }
  // True when pulls ask for deltas (PoolClientOptions::delta_pulls, and the
  // pulls are float32 on streams); each server answers them or not.
  bool uses_delta_pulls() const { return use_delta_; }
  // Per-server pulls answered so far with updates only, and with exact
  // weights (then updates); compressed update bytes received.
  int64_t update_pulls() const { return update_pulls_.load(); }
  int64_t exact_weight_pulls() const { return exact_weight_pulls_.load(); }
  int64_t update_bytes_received() const { return update_bytes_.load(); }
  // The error-feedback residual of server `server`'s range (empty with a
  // float push encoding).
  std::vector<float> Residual(int server) const;

 private:
  // Per server: its stubs, streams and residual.
  struct Server {
    std::string address;
    std::unique_ptr<asgd::v1::ParameterServer::Stub> stub;
    std::unique_ptr<grpc::GenericStub> raw_stub;
    std::vector<ChunkRef> float_plan;       // chunks of a float push or pull
    std::vector<ChunkRef> compressed_plan;  // chunks of a compressed push
    mutable absl::Mutex push_mu;            // one push at a time
    std::optional<GradEncoder> encoder ABSL_GUARDED_BY(push_mu);
    std::unique_ptr<ClientStream> push_stream ABSL_GUARDED_BY(push_mu);
    absl::Mutex pull_mu;  // one pull at a time
    std::unique_ptr<ClientStream> pull_stream ABSL_GUARDED_BY(pull_mu);
    // Delta pulls: whether the server answers them, its compressed chunk
    // limit, and the copy of its slice, exactly at copy_version when set.
    bool delta = false;
    int64_t max_compressed_elements = 0;
    std::vector<float> copy ABSL_GUARDED_BY(pull_mu);
    std::optional<uint64_t> copy_version ABSL_GUARDED_BY(pull_mu);
    uint64_t copy_lineage ABSL_GUARDED_BY(pull_mu) = 0;  // the server's
  };

  GrpcParamClient(PoolClientOptions options, ModelLayout layout,
                  ModelSpec model);

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
  PushEncoding push_encoding_ = PushEncoding::kFloat32;
  bool use_streams_ = false;
  bool use_delta_ = false;
  std::vector<std::unique_ptr<Server>> servers_;  // by server index
  std::atomic<int64_t> streams_opened_{0};
  std::atomic<int64_t> push_bytes_{0};
  std::atomic<int64_t> update_pulls_{0};
  std::atomic<int64_t> exact_weight_pulls_{0};
  std::atomic<int64_t> update_bytes_{0};
};

}  // namespace asgd

#endif  // ASGD_WORKER_PS_GRPC_PARAM_CLIENT_H_
