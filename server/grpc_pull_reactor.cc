#include "server/grpc_pull_reactor.h"

#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/grpc_status.h"
#include "common/refusal.h"
#include "common/tensor_wire.h"
#include "common/wire_codec.h"
#include "proto/asgd.pb.h"
#include "server/grpc_call.h"
#include "server/grpc_service.h"

namespace asgd {
namespace {

using asgd::v1::PushReply;

// One per-call pull (see the lifecycle in grpc_pull_reactor.h). Locking as
// PushReactor: `state_->mu` orders the gRPC thread that writes and the
// progress watchdog, which reaches the reactor only through `state_`.
class PullReactor : public grpc::ServerWriteReactor<grpc::ByteBuffer> {
 public:
  struct State {
    absl::Mutex mu;
    PullReactor* reactor ABSL_GUARDED_BY(mu);
  };

  // `request` is the parsed request, or the error to finish with.
  PullReactor(GrpcParameterService* service, ParamStore* store,
              ServerMetrics* metrics, grpc::CallbackServerContext* context,
              const absl::StatusOr<asgd::v1::PullRequest>& request)
      : timer_(metrics, RpcMethod::kPull),
        service_(service),
        context_(context),
        place_(service->admission(), CallKind::kPull, context->peer()),
        canceller_(context),
        state_(std::make_shared<State>()) {
    absl::MutexLock lock(&state_->mu);
    state_->reactor = this;
    absl::Status status = place_.Take();
    if (status.ok()) status = request.status();
    if (status.ok()) status = CheckPullDtype(request->dtype());
    if (status.ok() && request->delta()) {
      status = absl::InvalidArgumentError(
          "a delta pull is answered on PullStream only; on Pull, ask for "
          "weights (delta = false)");
    }
    if (!status.ok()) {
      FinishLocked(status);
      return;
    }
    // A client that reads nothing for the progress timeout is cut off.
    watch_ = canceller_.WatchProgress(service_->watchdog(), [state = state_] {
      absl::MutexLock lock(&state->mu);
      return state->reactor != nullptr && state->reactor->StalledLocked();
    });
    writer_.emplace(store, metrics, request->worker_id(),
                    static_cast<WireDtype>(request->dtype()),
                    /*end_marker=*/false);
    NextWriteLocked();
  }

  void OnWriteDone(bool ok) override {
    absl::MutexLock lock(&state_->mu);
    if (finished_) return;
    if (!ok) {
      FinishLocked(
          grpc::Status(grpc::StatusCode::CANCELLED, "pull write failed"));
      return;
    }
    service_->watchdog()->Touch(watch_);
    NextWriteLocked();
  }

  // The client went away (a reset, or the server is stopping): finish now
  // rather than after the write in flight fails.
  void OnCancel() override {
    absl::MutexLock lock(&state_->mu);
    FinishLocked(grpc::Status(grpc::StatusCode::CANCELLED, "pull cancelled"));
  }

  void OnDone() override {
    canceller_.Detach();
    {
      absl::MutexLock lock(&state_->mu);
      state_->reactor = nullptr;
    }
    delete this;
  }

 private:
  // True when the client read nothing for the progress timeout: the call is
  // finished and must be cancelled too (its status cannot reach a client
  // that reads nothing).
  bool StalledLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(state_->mu) {
    if (finished_) return false;
    FinishLocked(absl::DeadlineExceededError(
        absl::StrCat("the client read nothing of its pull for ",
                     absl::FormatDuration(service_->watchdog()->timeout()),
                     "; ended by the server")));
    return true;
  }

  void FinishLocked(const absl::Status& status)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(state_->mu) {
    FinishLocked(ToGrpcStatus(status, context_));
  }
  void FinishLocked(const grpc::Status& status)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(state_->mu) {
    if (finished_) return;
    finished_ = true;
    if (watch_ != nullptr) service_->watchdog()->Unwatch(watch_);
    // A pull that was answered whole gives its place back with the status
    // (its client may pull again at once and must find it free). One cut
    // off (reset by its client, refused, stalled) keeps it until gRPC is
    // done with the call (OnDone): it may still hold the chunk it was
    // writing, and a client that opens and resets pulls as fast as it can
    // must not hold more than its places' worth of them.
    if (status.ok()) place_.Release();
    timer_.Done(status);
    Finish(status);
    canceller_.CancelIfStillHeld(service_->watchdog());
  }

  void NextWriteLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(state_->mu) {
    if (!NextPullBuffer(&*writer_, &msg_)) {
      FinishLocked(grpc::Status::OK);
      return;
    }
    StartWrite(&msg_);
  }

  RpcTimer timer_;
  GrpcParameterService* const service_;
  grpc::CallbackServerContext* const context_;
  CallPlace place_;
  Canceller canceller_;
  const std::shared_ptr<State> state_;
  StreamWatchdog::Handle watch_;
  bool finished_ ABSL_GUARDED_BY(state_->mu) = false;
  std::optional<PullWriter> writer_;
  grpc::ByteBuffer msg_;
};

}  // namespace

grpc::ServerWriteReactor<grpc::ByteBuffer>* NewPullReactor(
    GrpcParameterService* service, ParamStore* store, ServerMetrics* metrics,
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* request) {
  asgd::v1::PullRequest parsed;
  absl::Status status = ParseFromByteBuffer(*request, &parsed, "pull request");
  if (!status.ok()) {
    return new PullReactor(service, store, metrics, context, status);
  }
  return new PullReactor(service, store, metrics, context, parsed);
}

}  // namespace asgd
