// PushStreamReactor: one call of GrpcParameterService
// (grpc_push_stream_reactor.cc).
//
// PushStream lifecycle (one reactor per stream, one read and one write in
// flight): admission as Push (the stream holds one of its address's
// max_pushes_per_peer places while it is open) -> idle: waiting for a push's
// first message, watched by the idle watchdog (stream_idle_timeout: the
// stream is ended with OK) -> receiving: a fresh PushAssembler takes the
// push's messages exactly as on a Push call, under the progress watchdog ->
// applying: the committed push is submitted, no deadline -> replying: one
// PushReply is written, under the progress watchdog (a client that does not
// read it is ended and cancelled) -> idle again. Any error, refusal or
// non-finite refusal ends the stream with that status, as on a Push call. The
// reactor reads nothing while a push is applied or answered, so a client cannot
// run ahead of the server on one stream (HTTP/2 flow control holds it back).
//
// Thread-safety: gRPC runs the reactor's callbacks on its threads; the
// watchdogs and the store reach it through a shared State under its lock.
#ifndef ASGD_SERVER_GRPC_PUSH_STREAM_REACTOR_H_
#define ASGD_SERVER_GRPC_PUSH_STREAM_REACTOR_H_

#include "grpcpp/grpcpp.h"
#include "server/param_store.h"
#include "server/server_metrics.h"

namespace asgd {

class GrpcParameterService;

// A new reactor for one call; it deletes itself when gRPC is done with the
// call. `service`, `store` and `metrics` (may be null) must outlive it.
grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>*
NewPushStreamReactor(GrpcParameterService* service, ParamStore* store,
                     ServerMetrics* metrics,
                     grpc::CallbackServerContext* context);

}  // namespace asgd

#endif  // ASGD_SERVER_GRPC_PUSH_STREAM_REACTOR_H_
