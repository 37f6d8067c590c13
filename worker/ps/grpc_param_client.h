// GrpcParamClient: ParamClient over gRPC to a pool of asgd servers.
//
// Create() connects to every address (waiting up to connect_timeout for
// servers that are still starting), asks each for its ModelDescription and
// checks that the pool is consistent: as many servers as addresses, each
// index exactly once, one layout fingerprint and one model spec, whose
// tensors are the layout's, and every server accepting the encodings asked
// for (a compressed push encoding needs every server to list it in
// push_dtypes with this build's compressed format version, else
// FailedPrecondition naming the server; pool_description.h). The addresses
// may be given in any order.
//
// Transport: one long-lived PushStream and one PullStream per server,
// opened on first use and reopened after they end, so a push or a pull costs
// messages on an open stream instead of a call each. A server whose
// description says it does not serve them (ModelDescription.streams false)
// is refused at Create with FailedPrecondition ("too old"). Pull and Push
// talk to all servers concurrently. Every operation has a deadline
// (rpc_timeout); one that misses it cancels the stream. A pull waits
// (within its deadline) for a server that is away to come back, and the
// channels retry connecting at least every half second, so a restarted
// server is used again within about that long. A stream the server closed
// because it sat idle (it ends with OK) is reopened and the push or pull
// sent again on the new one: nothing of it reached the server. A refusal the
// server sends (overload) comes back as a Refusal payload of the status.
// Tensor chunks are encoded straight into gRPC slices and decoded straight
// from them (common/tensor_wire.h); each client has its own connection per
// server.
//
// What this adapter does not decide: the encoding of pushes, the
// error-feedback residual and its restore policy (PushEncoder,
// push_encoder.h: a push a server did not apply goes back into that
// server's residual, never resent), and the checking of pull replies in
// their three forms (PullReader, pull_reader.h, into the caller's PullSink).
//
// Delta pulls (PoolClientOptions::delta_pulls, with float32 pulls, from
// servers with ModelDescription.delta_pulls): the client keeps an exact copy
// of each such server's slice (DeltaCopy), asks for the updates since it,
// and PullReader replays them; a reply the server sends as plain weights, or
// any error, leaves no exact copy, and the next pull asks for weights again.
// The copies are host vectors replayed on the client's threads, or, after
// KeepExactCopiesOn, copies a backend keeps on its device.
//
// Thread-safety: as ParamClient: one push (Push or PushEncoded) and one Pull
// in flight at a time (each server's streams and residual are used by one
// call at a time).
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
#include "common/grpc_security.h"
#include "common/wire_codec.h"
#include "grpcpp/generic/generic_stub.h"
#include "proto/asgd.grpc.pb.h"
#include "worker/ps/param_client.h"
#include "worker/ps/part_runner.h"
#include "worker/ps/pull_reader.h"
#include "worker/ps/pull_sink.h"
#include "worker/ps/push_encoder.h"

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
  using ParamClient::Pull;
  absl::Status Pull(PullSink* sink, std::vector<uint64_t>* versions) override;
  absl::Status PullAdmmSlot(int slot, absl::Span<float> values) override;
  absl::StatusOr<PushOutcome> Push(absl::Span<const float> gradient,
                                   const std::vector<uint64_t>& versions,
                                   int num_minibatches,
                                   PushKind kind = PushKind::kGradient) override;
  std::vector<absl::StatusOr<ServerPushReply>> PushEncoded(
      const std::vector<ServerPush>& parts,
      const std::vector<uint64_t>& versions, int num_minibatches) override;
  absl::Status KeepExactCopiesOn(const ExactCopyFactory& factory) override;
  DeltaPullStats delta_pull_stats() const override;
  absl::StatusOr<std::vector<uint64_t>> Versions() override;
  absl::StatusOr<PoolGrant> FetchBatches(const std::string& run_id,
                                         uint64_t num_frames, int batch_size,
                                         double epochs, int count) override;

  const PushEncoder* push_encoder() const override { return encoder_.get(); }

  // The encoding gradient pushes use.
  PushEncoding push_encoding() const { return encoder_->encoding(); }
  // Streams opened so far (both kinds, all servers): 2 per server while they
  // stay open.
  int64_t streams_opened() const;
  // Tensor data bytes of the push chunks written so far (all servers).
  int64_t push_bytes_sent() const { return push_bytes_.load(); }
  // True when pulls ask for deltas (PoolClientOptions::delta_pulls, and the
  // pulls are float32); each server answers them or not.
  bool uses_delta_pulls() const { return use_delta_; }
  // Per-server pulls answered so far with updates only, and with exact
  // weights (then updates); compressed update bytes received.
  int64_t update_pulls() const { return update_pulls_.load(); }
  int64_t exact_weight_pulls() const { return exact_weight_pulls_.load(); }
  int64_t update_bytes_received() const { return update_bytes_.load(); }
  // Bytes of the replay plans handed to exact copies kept elsewhere
  // (KeepExactCopiesOn): what went to the device for the updates.
  int64_t replay_plan_bytes() const { return plan_bytes_.load(); }
  // The error-feedback residual of server `server`'s range (empty with a
  // float push encoding).
  std::vector<float> Residual(int server) const;

 private:
  // Per server: its stubs, streams and delta copy.
  struct Server {
    std::string address;
    std::unique_ptr<asgd::v1::ParameterServer::Stub> stub;
    std::unique_ptr<grpc::GenericStub> raw_stub;
    absl::Mutex push_mu;  // one push at a time
    std::unique_ptr<ClientStream> push_stream ABSL_GUARDED_BY(push_mu);
    absl::Mutex pull_mu;  // one pull at a time
    std::unique_ptr<ClientStream> pull_stream ABSL_GUARDED_BY(pull_mu);
    bool delta = false;  // the server answers delta pulls
    DeltaCopy copy ABSL_GUARDED_BY(pull_mu);
    // Splits the replay of a delta pull over threads (null: one thread).
    std::unique_ptr<PartRunner> replay ABSL_GUARDED_BY(pull_mu);
  };

  GrpcParamClient(PoolClientOptions options, ModelLayout layout,
                  ModelSpec model);

  // Sets the limits, the encoder and the servers from the pool's
  // descriptions (by server index).
  absl::Status Configure(const std::vector<asgd::v1::ModelDescription>& descs,
                         PushEncoding push_encoding,
                         std::vector<std::unique_ptr<Server>> servers);
  // The server's pull or push stream, opened when it has none.
  ClientStream& OpenStream(Server& server, bool pull, absl::Time deadline);
  // `admm_slot` >= 0: that ADMM slot instead of the weights (never a delta
  // pull).
  absl::StatusOr<uint64_t> PullFrom(int server, PullSink* sink,
                                    int admm_slot = -1);
  // Pull and PullAdmmSlot: every server's part, in parallel.
  absl::Status PullAll(PullSink* sink, std::vector<uint64_t>* versions,
                       int admm_slot);
  // Sends `push` to `server` and returns its reply.
  absl::StatusOr<ServerPushReply> PushTo(int server, const ServerPush& push,
                                         uint64_t version, int num_minibatches);
  // Encodes server `server`'s part of `gradient`, sends it and settles it
  // with the encoder (restored unless applied).
  absl::StatusOr<ServerPushReply> EncodeAndPush(int server,
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
  bool use_delta_ = false;
  std::unique_ptr<PushEncoder> encoder_;
  std::vector<std::unique_ptr<Server>> servers_;  // by server index
  std::atomic<int64_t> streams_opened_{0};
  std::atomic<int64_t> push_bytes_{0};
  std::atomic<int64_t> update_pulls_{0};
  std::atomic<int64_t> exact_weight_pulls_{0};
  std::atomic<int64_t> update_bytes_{0};
  std::atomic<int64_t> plan_bytes_{0};
  std::atomic<bool> copies_elsewhere_{false};
};

}  // namespace asgd

#endif  // ASGD_WORKER_PS_GRPC_PARAM_CLIENT_H_
