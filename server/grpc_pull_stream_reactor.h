// PullStreamReactor: one call of GrpcParameterService
// (grpc_pull_stream_reactor.cc).
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
// Thread-safety: gRPC runs the reactor's callbacks on its threads; the
// watchdogs and the store reach it through a shared State under its lock.
#ifndef ASGD_SERVER_GRPC_PULL_STREAM_REACTOR_H_
#define ASGD_SERVER_GRPC_PULL_STREAM_REACTOR_H_

#include "grpcpp/grpcpp.h"
#include "server/param_store.h"
#include "server/server_metrics.h"

namespace asgd {

class GrpcParameterService;

// A new reactor for one call; it deletes itself when gRPC is done with the
// call. `service`, `store` and `metrics` (may be null) must outlive it.
grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>*
NewPullStreamReactor(GrpcParameterService* service, ParamStore* store,
                     ServerMetrics* metrics,
                     grpc::CallbackServerContext* context);

}  // namespace asgd

#endif  // ASGD_SERVER_GRPC_PULL_STREAM_REACTOR_H_
