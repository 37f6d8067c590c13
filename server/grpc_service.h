// GrpcParameterService: the gRPC adapter of a ParamStore (asgd.v1
// ParameterServer, callback API). Handlers only validate, stage and enqueue;
// the ParamStore's shard threads apply.
//
// Pull and Push are raw methods: their tensor chunks are encoded and decoded
// straight to and from gRPC byte buffers by common/tensor_wire.h (the same
// protobuf bytes; any asgd.v1 client works), so a chunk is copied once on
// each side instead of three times.
//
// Push lifecycle (one reactor per stream, one read in flight): each message
// is decoded and goes to a PushAssembler (push_assembler.h: header, then chunks staged into a
// private buffer, then the commit) -> on the commit, Submit() to the store ->
// Finish when every shard applied it. Any invalid message finishes the call with
// INVALID_ARGUMENT at once and discards the staging buffer; a stream that
// ends before its commit is never applied.
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

#include "proto/asgd.grpc.pb.h"
#include "server/batch_pool.h"
#include "server/param_store.h"
#include "server/server_metrics.h"

namespace asgd {

using ParameterServerBase = asgd::v1::ParameterServer::WithCallbackMethod_DescribeModel<
    asgd::v1::ParameterServer::WithRawCallbackMethod_Pull<
        asgd::v1::ParameterServer::WithRawCallbackMethod_Push<
            asgd::v1::ParameterServer::WithCallbackMethod_FetchBatches<
                asgd::v1::ParameterServer::Service>>>>;

class GrpcParameterService final : public ParameterServerBase {
 public:
  // `store`, `pool` and `metrics` (may be null) must outlive the service.
  GrpcParameterService(ParamStore* store, BatchPool* pool,
                       ServerMetrics* metrics = nullptr);

  grpc::ServerUnaryReactor* DescribeModel(
      grpc::CallbackServerContext* context,
      const asgd::v1::DescribeModelRequest* request,
      asgd::v1::ModelDescription* response) override;

  // Request: asgd.v1.PullRequest; stream of asgd.v1.PullChunk.
  grpc::ServerWriteReactor<grpc::ByteBuffer>* Pull(
      grpc::CallbackServerContext* context,
      const grpc::ByteBuffer* request) override;

  // Stream of asgd.v1.PushChunk; reply: asgd.v1.PushReply.
  grpc::ServerReadReactor<grpc::ByteBuffer>* Push(
      grpc::CallbackServerContext* context, grpc::ByteBuffer* reply) override;

  grpc::ServerUnaryReactor* FetchBatches(
      grpc::CallbackServerContext* context,
      const asgd::v1::FetchBatchesRequest* request,
      asgd::v1::FetchBatchesReply* reply) override;

 private:
  ParamStore* const store_;
  BatchPool* const pool_;
  ServerMetrics* const metrics_;
  asgd::v1::ModelDescription description_;  // without the version
};

}  // namespace asgd

#endif  // ASGD_SERVER_GRPC_SERVICE_H_
