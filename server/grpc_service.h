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
// Admission (call_admission.h), for every call and stream before any work
// is done for it: at most max_calls calls alive on the server (until gRPC
// is done with them), else UNAVAILABLE with Refusal SERVER_LIMIT at once;
// at most max_pushes_per_peer calls of each kind (pushes, pull streams,
// pulls, other calls) in flight from one client address, else UNAVAILABLE
// with Refusal PEER_LIMIT at once. A refusal holds nothing, so a client that
// opens and resets calls as fast as it can (HTTP/2 "rapid reset") makes the
// server refuse them, not hold them. A call the server ends because its
// client reads nothing (a pull, or a push stream's reply, that makes no
// progress for push_progress_timeout) is also cancelled (RST_STREAM), since
// its status could never reach that client; and any call that gRPC still
// holds push_progress_timeout after its status was sent is cancelled, so
// that what a client that stops reading leaves queued is freed.
//
// Push lifecycle (one reactor per stream, one read in flight): admission
// -> each message is decoded and
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
// Pull lifecycle: admission, then read the version, then stream the
// server's range chunk by chunk, one write in flight, each chunk copied from
// the live weights (or from a snapshot kept as the worker's backup model when
// DC-ASGD is on), under the progress watchdog (a client that reads nothing
// for push_progress_timeout is ended with DEADLINE_EXCEEDED and cancelled).
// A delta request gets INVALID_ARGUMENT: delta pulls are PullStream's.
//
// PushStream lifecycle (one reactor per stream, one read and one write in
// flight): admission as Push (the stream holds one of its address's
// max_pushes_per_peer places while it is open) -> idle: waiting for a push's
// first message, watched by the idle watchdog (stream_idle_timeout: the
// stream is ended with OK) -> receiving: a fresh PushAssembler takes the
// push's messages exactly as on a Push call, under the progress watchdog ->
// applying: the committed push is submitted, no deadline -> replying: one
// PushReply is written, under the progress watchdog (a client that does not
// read it is ended and cancelled) -> idle again. Any error, refusal or non-finite
// refusal ends the stream with that status, as on a Push call. The reactor
// reads nothing while a push is applied or answered, so a client cannot run
// ahead of the server on one stream (HTTP/2 flow control holds it back).
//
// PullStream lifecycle: admission (its own per-address count, the same cap)
// -> idle (waiting for a PullRequest, idle watchdog) -> writing the pull's
// chunks and its end-of-pull message, one write in flight, under the
// progress watchdog (a client that stops reading for push_progress_timeout
// is ended with DEADLINE_EXCEEDED) -> idle again. An invalid request ends the
// stream with INVALID_ARGUMENT. A delta request (server/delta_pulls.h) is
// answered with updates, or with a consistent base and updates (waiting,
// under the progress watchdog, while the shards copy the base; the callback
// reaches the reactor through its State), or with plain weights.
//
// Shutdown: BeginShutdown() ends every idle stream at once (UNAVAILABLE,
// "server shutting down"), and a stream that finishes its push or pull
// after that ends too, so gRPC's shutdown does not wait for idle streams.
//
// FetchBatches hands out minibatch ids from the shared BatchPool.
//
// Thread-safety: the service is thread-safe; the store must outlive it.
#ifndef ASGD_SERVER_GRPC_SERVICE_H_
#define ASGD_SERVER_GRPC_SERVICE_H_

#include <atomic>
#include <memory>
#include <string>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "proto/asgd.grpc.pb.h"
#include "server/batch_pool.h"
#include "server/call_admission.h"
#include "server/delta_pulls.h"
#include "server/param_store.h"
#include "server/server_metrics.h"
#include "server/stream_watchdog.h"

namespace asgd {

using ParameterServerBase =
    asgd::v1::ParameterServer::WithRawCallbackMethod_DescribeModel<
        asgd::v1::ParameterServer::WithRawCallbackMethod_Pull<
            asgd::v1::ParameterServer::WithRawCallbackMethod_Push<
                asgd::v1::ParameterServer::WithRawCallbackMethod_FetchBatches<
                    asgd::v1::ParameterServer::WithRawCallbackMethod_PushStream<
                        asgd::v1::ParameterServer::
                            WithRawCallbackMethod_PullStream<
                                asgd::v1::ParameterServer::Service>>>>>>;

struct GrpcServiceOptions {
  // A push that receives no message for this long before its commit (and a
  // pull stream whose client reads nothing for this long) is ended by the
  // server.
  absl::Duration push_progress_timeout = absl::Seconds(20);
  // Calls of each kind in flight from one client address (the peer's IP,
  // any port): pushes (an open PushStream counts as one), pull streams,
  // pulls, other calls; more are refused at once. 0: no limit.
  int max_pushes_per_peer = 16;
  // Calls alive on the server from all clients; more are refused at once.
  // 0: no limit.
  int max_calls = 512;
  // gRPC's own limits, set by GrpcServer: HTTP/2 streams open per client
  // connection, and the memory gRPC's transport may take (resource quota).
  int max_streams_per_connection = 128;
  int64_t grpc_memory_bytes = int64_t{2} << 30;
  // A PushStream or PullStream with no push or pull under way for this long
  // is ended (OK; the client opens a new one when it needs it).
  absl::Duration stream_idle_timeout = absl::Seconds(120);
  // Memory for the consistent copies of the weights that delta pulls send
  // (server/delta_pulls.h); beyond it a delta pull gets plain weights.
  int64_t max_delta_base_mb = 1024;
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

  // Stream of asgd.v1.PushChunk (many pushes); stream of asgd.v1.PushReply.
  grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* PushStream(
      grpc::CallbackServerContext* context) override;

  // Stream of asgd.v1.PullRequest; stream of asgd.v1.PullChunk.
  grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* PullStream(
      grpc::CallbackServerContext* context) override;

  // Push calls and PushStreams in flight (admitted, not yet finished).
  int pushes_in_flight() const;
  // PullStreams open.
  int pull_streams_open() const;
  // Per-call pulls in flight.
  int pulls_in_flight() const;
  // Calls alive (admitted, gRPC not done with them).
  int calls_alive() const { return admission_.alive(); }

  // Every call's admission.
  CallAdmission* admission() { return &admission_; }

  // Ends idle streams now and every stream once its push or pull is done.
  void BeginShutdown();
  bool shutting_down() const {
    return shutting_down_.load(std::memory_order_acquire);
  }

  // What delta pulls send; null when the store keeps no update log.
  DeltaPulls* delta_pulls() { return delta_pulls_.get(); }

  StreamWatchdog* watchdog() { return &watchdog_; }
  StreamWatchdog* idle_watchdog() { return &idle_watchdog_; }

 private:
  ParamStore* const store_;
  BatchPool* const pool_;
  ServerMetrics* const metrics_;
  const GrpcServiceOptions options_;
  asgd::v1::ModelDescription description_;  // without the version
  StreamWatchdog watchdog_;
  StreamWatchdog idle_watchdog_;
  std::unique_ptr<DeltaPulls> delta_pulls_;
  std::atomic<bool> shutting_down_{false};
  CallAdmission admission_;
};

}  // namespace asgd

#endif  // ASGD_SERVER_GRPC_SERVICE_H_
