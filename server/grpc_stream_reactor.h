// StreamReactor: the base of the long-lived stream reactors
// (grpc_push_stream_reactor.h, grpc_pull_stream_reactor.h).
//
// Thread-safety: see the class comment; everything runs under `state_->mu`.
#ifndef ASGD_SERVER_GRPC_STREAM_REACTOR_H_
#define ASGD_SERVER_GRPC_STREAM_REACTOR_H_

#include <memory>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "common/grpc_status.h"
#include "grpcpp/grpcpp.h"
#include "server/grpc_call.h"
#include "server/grpc_service.h"

namespace asgd {

// What a long-lived stream's reactor (PushStreamReactor, PullStreamReactor)
// holds and gives back: its place among its client address's streams, the
// idle watch (between pushes or pulls) and the progress watch (during one),
// the RPC timer, and the State through which the watchdogs and the store
// reach it. Locking: `state_->mu` orders the gRPC threads (reads and
// writes), the shard thread that answers a push, and the two watchdogs;
// whoever finishes first sets finished_. The watchdogs reach the reactor only
// through `state_`, which OnDone clears before the reactor is deleted.
// Derived provides IdleLocked() and StalledLocked() (what the idle and the
// progress watchdog do) and a FinishLocked(status) that releases its own
// state, then calls EndLocked(status).
template <class Derived>
class StreamReactor
    : public grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer> {
 public:
  struct State {
    absl::Mutex mu;
    Derived* reactor ABSL_GUARDED_BY(mu);
  };

  void OnDone() override {
    canceller_.Detach();
    {
      absl::MutexLock lock(&state_->mu);
      state_->reactor = nullptr;
    }
    delete static_cast<Derived*>(this);
  }

 protected:
  StreamReactor(GrpcParameterService* service, ServerMetrics* metrics,
                RpcMethod method, CallKind kind,
                grpc::CallbackServerContext* context)
      : timer_(metrics, method),
        service_(service),
        context_(context),
        place_(service->admission(), kind, context->peer()),
        canceller_(context),
        state_(std::make_shared<State>()) {}

  // From Derived's constructor: makes the reactor reachable through state_
  // and takes its place among the server's calls; the refusal to finish the
  // stream with when there is none.
  absl::Status AdmitLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(state_->mu) {
    state_->reactor = static_cast<Derived*>(this);
    return place_.Take();
  }

  // Idle: the idle watchdog ends the stream unless the next push or pull
  // starts in time. False when the server is shutting down (the caller ends
  // the stream): a shutdown that began before the watch is seen here, one
  // that begins after it expires the watch.
  bool WatchIdleLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(state_->mu) {
    idle_watch_ = service_->idle_watchdog()->Watch([state = state_] {
      absl::MutexLock lock(&state->mu);
      if (state->reactor != nullptr) state->reactor->IdleLocked();
    });
    return !service_->shutting_down();
  }
  void StopIdleWatchLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(state_->mu) {
    service_->idle_watchdog()->Unwatch(idle_watch_);
    idle_watch_ = nullptr;
  }

  // A push or pull under way: the progress watchdog ends the stream when it
  // makes no progress for the progress timeout. Derived's StalledLocked()
  // returns true when the stream must also be cancelled (its client reads
  // nothing, so it would never see the status); that runs here, outside the
  // lock.
  void WatchProgressLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(state_->mu) {
    progress_watch_ =
        canceller_.WatchProgress(service_->watchdog(), [state = state_] {
          absl::MutexLock lock(&state->mu);
          return state->reactor != nullptr && state->reactor->StalledLocked();
        });
  }
  void TouchProgressLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(state_->mu) {
    service_->watchdog()->Touch(progress_watch_);
  }
  void StopProgressWatchLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(state_->mu) {
    service_->watchdog()->Unwatch(progress_watch_);
    progress_watch_ = nullptr;
  }

  // Ends the stream (once: Derived's FinishLocked checks finished_ first),
  // giving back the watches and the address's place here, not in OnDone(),
  // which gRPC may run later than the client sees the status.
  void EndLocked(const absl::Status& status)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(state_->mu) {
    finished_ = true;
    if (idle_watch_ != nullptr) service_->idle_watchdog()->Unwatch(idle_watch_);
    if (progress_watch_ != nullptr) {
      service_->watchdog()->Unwatch(progress_watch_);
    }
    place_.Release();
    const grpc::Status g = ToGrpcStatus(status, context_);
    timer_.Done(g);
    Finish(g);
    // A client that reads nothing would keep the status queued.
    canceller_.CancelIfStillHeld(service_->watchdog());
  }

  RpcTimer timer_;
  GrpcParameterService* const service_;
  grpc::CallbackServerContext* const context_;
  CallPlace place_;
  Canceller canceller_;
  const std::shared_ptr<State> state_;
  bool finished_ ABSL_GUARDED_BY(state_->mu) = false;

 private:
  StreamWatchdog::Handle idle_watch_;
  StreamWatchdog::Handle progress_watch_;
};

}  // namespace asgd

#endif  // ASGD_SERVER_GRPC_STREAM_REACTOR_H_
