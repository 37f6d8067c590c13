// UnaryReactor: the reactor of GrpcParameterService's unary calls.
//
// Thread-safety: used by the one gRPC thread that runs the handler, then by
// gRPC's OnDone.
#ifndef ASGD_SERVER_GRPC_UNARY_REACTOR_H_
#define ASGD_SERVER_GRPC_UNARY_REACTOR_H_

#include "absl/status/status.h"
#include "common/grpc_status.h"
#include "grpcpp/grpcpp.h"
#include "server/grpc_call.h"
#include "server/grpc_service.h"

namespace asgd {

// A unary call (DescribeModel, FetchBatches): admitted like every call, it
// is answered at once; the reactor lives until gRPC is done with the call,
// so that the call counts among the calls alive until then, and cancels it
// if a client that reads nothing keeps the reply queued for the progress
// timeout.
class UnaryReactor : public grpc::ServerUnaryReactor {
 public:
  UnaryReactor(GrpcParameterService* service, ServerMetrics* metrics,
               RpcMethod method, grpc::CallbackServerContext* context)
      : service_(service),
        context_(context),
        timer_(metrics, method),
        place_(service->admission(), CallKind::kOther, context->peer()),
        canceller_(context) {}

  // Admission; the refusal to Answer() with when the call is not admitted.
  absl::Status Admit() { return place_.Take(); }

  // Finishes the call with `status` (the reply, when OK, is already set).
  void Answer(const absl::Status& status) {
    place_.Release();
    const grpc::Status g = ToGrpcStatus(status, context_);
    timer_.Done(g);
    Finish(g);
    canceller_.CancelIfStillHeld(service_->watchdog());
  }

  void OnDone() override {
    canceller_.Detach();
    delete this;
  }

 private:
  GrpcParameterService* const service_;
  grpc::CallbackServerContext* const context_;
  RpcTimer timer_;
  CallPlace place_;
  Canceller canceller_;
};

}  // namespace asgd

#endif  // ASGD_SERVER_GRPC_UNARY_REACTOR_H_
