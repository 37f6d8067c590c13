// GrpcParameterService: the gRPC adapter of a ParamStore (asgd.v1
// ParameterServer, callback API). Handlers only validate, stage and enqueue;
// the ParamStore's shard threads apply.
//
// Every method is raw: requests are parsed here (a request that does not
// parse gets INVALID_ARGUMENT with a message, not gRPC's bare UNIMPLEMENTED),
// and Pull and Push chunks are encoded and decoded straight to and from gRPC
// byte buffers by common/tensor_wire.h (the same protobuf bytes; any asgd.v1
// client works), so a chunk is copied once on each side instead of three
// times.
//
// Push lifecycle (one reactor per stream, one read in flight): admission
// (at most max_pushes_per_peer pushes in flight per client address, else
// UNAVAILABLE with Refusal PEER_LIMIT at once) -> each message is decoded and
// goes to a PushAssembler (push_assembler.h: header, then chunks staged into
// a buffer taken from the store's capped pool when the first chunk arrives,
// then the commit) -> on the commit, Submit() to the store -> Finish when
// every shard applied it. Any invalid message finishes the call with
// INVALID_ARGUMENT at once and discards the staging buffer; no staging memory
// left finishes it with UNAVAILABLE (Refusal PUSH_MEMORY); a stream that ends
// before its commit is never applied. Until its commit, a stream that
// receives no message for push_progress_timeout is ended by the server
// (DEADLINE_EXCEEDED, counted as "stalled"), so stalled clients hold neither
// memory nor a slot for long.
//
// Pull lifecycle: read the version, then stream the server's range chunk by
// chunk, one write in flight, each chunk copied from the live weights (or from
// a snapshot kept as the worker's backup model when DC-ASGD is on).
//
// FetchBatches hands out minibatch ids from the shared BatchPool.
//
// Thread-safety: the service is thread-safe; the store must outlive it.
#ifndef ASGD_SERVER_GRPC_SERVICE_H_
#define ASGD_SERVER_GRPC_SERVICE_H_

#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "proto/asgd.grpc.pb.h"
#include "server/batch_pool.h"
#include "server/param_store.h"
#include "server/server_metrics.h"
#include "server/stream_watchdog.h"

namespace asgd {

using ParameterServerBase =
    asgd::v1::ParameterServer::WithRawCallbackMethod_DescribeModel<
        asgd::v1::ParameterServer::WithRawCallbackMethod_Pull<
            asgd::v1::ParameterServer::WithRawCallbackMethod_Push<
                asgd::v1::ParameterServer::WithRawCallbackMethod_FetchBatches<
                    asgd::v1::ParameterServer::Service>>>>;

struct GrpcServiceOptions {
  // A push stream that receives no message for this long before its commit
  // is ended by the server.
  absl::Duration push_progress_timeout = absl::Seconds(20);
  // Pushes in flight from one client address (the peer's IP, any port);
  // more are refused at once. 0: no limit.
  int max_pushes_per_peer = 16;
};

class GrpcParameterService final : public ParameterServerBase {
 public:
  // `store`, `pool` and `metrics` (may be null) must outlive the service.
  GrpcParameterService(ParamStore* store, BatchPool* pool,
                       ServerMetrics* metrics = nullptr,
                       const GrpcServiceOptions& options = {});

  // Request: asgd.v1.DescribeModelRequest; reply: asgd.v1.ModelDescription.
  grpc::ServerUnaryReactor* DescribeModel(grpc::CallbackServerContext* context,
                                          const grpc::ByteBuffer* request,
                                          grpc::ByteBuffer* reply) override;

  // Request: asgd.v1.PullRequest; stream of asgd.v1.PullChunk.
  grpc::ServerWriteReactor<grpc::ByteBuffer>* Pull(
      grpc::CallbackServerContext* context,
      const grpc::ByteBuffer* request) override;

  // Stream of asgd.v1.PushChunk; reply: asgd.v1.PushReply.
  grpc::ServerReadReactor<grpc::ByteBuffer>* Push(
      grpc::CallbackServerContext* context, grpc::ByteBuffer* reply) override;

  // Request: asgd.v1.FetchBatchesRequest; reply: asgd.v1.FetchBatchesReply.
  grpc::ServerUnaryReactor* FetchBatches(grpc::CallbackServerContext* context,
                                         const grpc::ByteBuffer* request,
                                         grpc::ByteBuffer* reply) override;

  // Push streams in flight (admitted, not yet finished).
  int pushes_in_flight() const;

  // Admission of one push stream from `peer` (grpc's peer string): false
  // when the peer has max_pushes_per_peer in flight. Release() when it ends.
  bool AdmitPush(const std::string& peer);
  void ReleasePush(const std::string& peer);

  StreamWatchdog* watchdog() { return &watchdog_; }

 private:
  ParamStore* const store_;
  BatchPool* const pool_;
  ServerMetrics* const metrics_;
  const GrpcServiceOptions options_;
  asgd::v1::ModelDescription description_;  // without the version
  StreamWatchdog watchdog_;
  mutable absl::Mutex peers_mu_;
  absl::flat_hash_map<std::string, int> pushes_per_peer_
      ABSL_GUARDED_BY(peers_mu_);
  int pushes_in_flight_ ABSL_GUARDED_BY(peers_mu_) = 0;
};

// The client address of a gRPC peer string without its port
// ("ipv4:10.0.0.7:51234" -> "ipv4:10.0.0.7", "ipv6:[::1]:5" -> "ipv6:[::1]").
std::string PeerAddress(const std::string& peer);

}  // namespace asgd

#endif  // ASGD_SERVER_GRPC_SERVICE_H_
