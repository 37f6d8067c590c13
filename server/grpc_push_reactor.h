// PushReactor: one call of GrpcParameterService (grpc_push_reactor.cc).
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
// Thread-safety: gRPC runs the reactor's callbacks on its threads; the
// watchdogs and the store reach it through a shared State under its lock.
#ifndef ASGD_SERVER_GRPC_PUSH_REACTOR_H_
#define ASGD_SERVER_GRPC_PUSH_REACTOR_H_

#include "grpcpp/grpcpp.h"
#include "server/param_store.h"
#include "server/server_metrics.h"

namespace asgd {

class GrpcParameterService;

// A new reactor for one call; it deletes itself when gRPC is done with the
// call. `service`, `store` and `metrics` (may be null) must outlive it.
grpc::ServerReadReactor<grpc::ByteBuffer>* NewPushReactor(
    GrpcParameterService* service, ParamStore* store, ServerMetrics* metrics,
    grpc::CallbackServerContext* context, grpc::ByteBuffer* reply);

}  // namespace asgd

#endif  // ASGD_SERVER_GRPC_PUSH_REACTOR_H_
