// PullReactor: one call of GrpcParameterService (grpc_pull_reactor.cc).
//
// Pull lifecycle: admission, then read the version, then stream the
// server's range chunk by chunk, one write in flight, each chunk copied from
// the live weights (or from a snapshot kept as the worker's backup model when
// DC-ASGD is on), under the progress watchdog (a client that reads nothing
// for push_progress_timeout is ended with DEADLINE_EXCEEDED and cancelled).
// A delta request gets INVALID_ARGUMENT: delta pulls are PullStream's.
//
// Thread-safety: gRPC runs the reactor's callbacks on its threads; the
// watchdogs and the store reach it through a shared State under its lock.
#ifndef ASGD_SERVER_GRPC_PULL_REACTOR_H_
#define ASGD_SERVER_GRPC_PULL_REACTOR_H_

#include "grpcpp/grpcpp.h"
#include "server/param_store.h"
#include "server/server_metrics.h"

namespace asgd {

class GrpcParameterService;

// A new reactor for one call; it deletes itself when gRPC is done with the
// call. `service`, `store` and `metrics` (may be null) must outlive it.
grpc::ServerWriteReactor<grpc::ByteBuffer>* NewPullReactor(
    GrpcParameterService* service, ParamStore* store, ServerMetrics* metrics,
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* request);

}  // namespace asgd

#endif  // ASGD_SERVER_GRPC_PULL_REACTOR_H_
