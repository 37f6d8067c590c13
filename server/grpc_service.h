// GrpcParameterService: the gRPC adapter of a ParamStore (asgd.v1
// ParameterServer, callback API). Handlers only validate, stage and enqueue;
// the ParamStore's shard threads apply.
//
// Every method is raw: requests are parsed here (a request that does not
// parse gets INVALID_ARGUMENT with a message, not gRPC's bare UNIMPLEMENTED),
// and pull and push chunks are encoded and decoded straight to and from gRPC
// byte buffers by common/tensor_wire.h (the same protobuf bytes; any asgd.v1
// client works), so a chunk is copied once on each side instead of three
// times.
//
// One transport per direction: pushes travel on long-lived PushStreams and
// pulls on PullStreams. The per-call Push and Pull of earlier versions are
// not served (proto/asgd.proto: a client that calls them gets gRPC's
// UNIMPLEMENTED; ModelDescription.protocol_version says which a server has).
//
// Each method's reactor has its own file, with its lifecycle:
// grpc_push_stream_reactor.h (PushStream), grpc_pull_stream_reactor.h
// (PullStream), grpc_unary_reactor.h (DescribeModel, FetchBatches); what a
// pull sends is server/pull_writer.h, and the admission and cancelling every
// call shares is server/grpc_call.h.
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
        asgd::v1::ParameterServer::WithRawCallbackMethod_FetchBatches<
            asgd::v1::ParameterServer::WithRawCallbackMethod_PushStream<
                asgd::v1::ParameterServer::WithRawCallbackMethod_PullStream<
                    asgd::v1::ParameterServer::Service>>>>;

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
  // Calls alive on the server from one client address (the same count, per
  // address), so that one client can not hold every max_calls place; more
  // are refused at once. 0: no limit.
  int max_calls_per_peer = 128;
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
  // The time of the progress and idle watchdogs. Null: absl::Now, each
  // watchdog checked by its own thread. Set (tests): no threads; nothing
  // expires until the caller moves its clock and calls watchdog()->Poll()
  // or idle_watchdog()->Poll() (server/manual_clock.h).
  StreamWatchdog::Clock clock;
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

  // PushStreams open (admitted, not yet finished).
  int pushes_in_flight() const;
  // PullStreams open.
  int pull_streams_open() const;
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
