// The call plumbing every reactor of GrpcParameterService shares: the RPC
// timer, the call's place in the server's admission (call_admission.h), the
// canceller that resets a call whose client reads nothing, and the encoding
// of the messages the reactors write (pull messages, push replies).
//
// Admission, for every call and stream before any work is done for it: at
// most max_calls calls alive on the server (until gRPC is done with them),
// else UNAVAILABLE with Refusal SERVER_LIMIT at once; at most
// max_calls_per_peer of them from one client address, and at most
// max_pushes_per_peer calls of each kind (pushes, pull streams, pulls, other
// calls) in flight from one client address, else UNAVAILABLE with Refusal
// PEER_LIMIT at once. A refusal holds nothing, so a client that opens and
// resets calls as fast as it can (HTTP/2 "rapid reset") makes the server
// refuse them, not hold them, and never takes the other clients' places. A
// call the server ends because its client reads nothing is also cancelled
// (RST_STREAM), since its status could never reach that client; and any call
// that gRPC still holds push_progress_timeout after its status was sent is
// cancelled, so that what a client that stops reading leaves queued is freed.
//
// Thread-safety: a CallPlace and an RpcTimer are used under their reactor's
// lock; a Canceller's methods are called under the reactor's lock, and it
// takes its own lock (never held with the reactor's) to cancel.
#ifndef ASGD_SERVER_GRPC_CALL_H_
#define ASGD_SERVER_GRPC_CALL_H_

#include <functional>
#include <memory>
#include <string>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/refusal.h"
#include "grpcpp/grpcpp.h"
#include "server/call_admission.h"
#include "server/param_store.h"
#include "server/pull_writer.h"
#include "server/server_metrics.h"
#include "server/stream_watchdog.h"

namespace asgd {

class GrpcParameterService;

// Records one RPC in the metrics (if any): started now, handled at Done().
class RpcTimer {
 public:
  RpcTimer(ServerMetrics* metrics, RpcMethod method)
      : metrics_(metrics), method_(method), start_(absl::Now()) {
    if (metrics_ != nullptr) metrics_->OnRpcStarted(method);
  }
  void Done(const grpc::Status& status) {
    if (metrics_ == nullptr) return;
    metrics_->OnRpcHandled(method_, status.error_code(),
                           absl::ToDoubleSeconds(absl::Now() - start_));
  }
  ServerMetrics* metrics() const { return metrics_; }

 private:
  ServerMetrics* const metrics_;
  const RpcMethod method_;
  const absl::Time start_;
};

// A call's place in the server's admission (call_admission.h): among the
// calls alive, in all and from its address, from its reactor's construction
// to its deletion (OnDone), and among its client address's calls of its kind
// from Take() until Release(), when its status is sent. Used under its
// reactor's lock.
class CallPlace {
 public:
  CallPlace(CallAdmission* admission, CallKind kind, const std::string& peer)
      : admission_(admission), kind_(kind), address_(PeerAddress(peer)) {}
  CallPlace(const CallPlace&) = delete;
  CallPlace& operator=(const CallPlace&) = delete;
  ~CallPlace() {
    Release();
    if (entered_) admission_->Leave(address_);
  }

  // OK, or the refusal to finish the call with (nothing counted).
  absl::Status Take() {
    switch (admission_->Enter(address_)) {
      case Entry::kEntered:
        break;
      case Entry::kServerFull:
        return WithRefusal(
            absl::UnavailableError(absl::StrCat(
                "server busy: it has the most calls in flight it takes (",
                admission_->limits().total,
                ", --max_calls) from all clients; retry after a backoff")),
            Refusal::kServerLimit);
      case Entry::kAddressFull:
        return WithRefusal(
            absl::UnavailableError(absl::StrCat(
                "server busy: this client address has the most calls alive "
                "it may hold (",
                admission_->limits().per_address_alive,
                ", --max_calls_per_peer; a call counts until the server has "
                "retired it); retry after a backoff")),
            Refusal::kPeerLimit);
    }
    entered_ = true;
    if (!admission_->Admit(kind_, address_)) {
      return WithRefusal(
          absl::UnavailableError(absl::StrCat(
              "server busy: this client address has too many ", KindName(),
              " in flight (", admission_->limits().per_peer,
              ", --max_pushes_per_peer); retry after one of them ends")),
          Refusal::kPeerLimit);
    }
    admitted_ = true;
    return absl::OkStatus();
  }

  // Gives back the place among the address's calls (idempotent).
  void Release() {
    if (!admitted_) return;
    admitted_ = false;
    admission_->Release(kind_, address_);
  }

 private:
  const char* KindName() const {
    switch (kind_) {
      case CallKind::kPush:
        return "pushes";
      case CallKind::kPullStream:
        return "pull streams";
      case CallKind::kOther:
        return "calls";
    }
    return "calls";
  }

  CallAdmission* const admission_;
  const CallKind kind_;
  const std::string address_;
  bool entered_ = false;
  bool admitted_ = false;
};

// The reason a push refused by its CallPlace is counted under.
RejectReason AdmissionReason(const absl::Status& refusal);

// Cancels a call from the server (RST_STREAM), so that a client that reads
// nothing sees its call end and gRPC frees what it holds for it: a call the
// server finished while its client read nothing still holds its last
// messages, queued behind HTTP/2 flow control, until then. Reaches the call
// through a handle that the reactor's OnDone clears first (Detach()), so a
// watchdog never touches a call gRPC is done with. Its own lock, never held
// with the reactor's: gRPC may run the reactor's callbacks when cancelled.
class Canceller {
 public:
  explicit Canceller(grpc::CallbackServerContext* context)
      : handle_(std::make_shared<Handle>()) {
    handle_->context = context;
  }
  ~Canceller() { Detach(); }

  // Watches a call's progress on `watchdog`: when it expires, `stalled`
  // (which takes the reactor's lock and ends the call) runs, and when it
  // returns true the call is cancelled too, after that lock is released.
  // Safe after the reactor is gone.
  StreamWatchdog::Handle WatchProgress(StreamWatchdog* watchdog,
                                       std::function<bool()> stalled) const {
    return watchdog->Watch([stalled = std::move(stalled), handle = handle_] {
      if (stalled()) Cancel(*handle);
    });
  }

  // Cancels the call if gRPC still holds it `watchdog`'s timeout after now
  // (its status sent, a client that does not read).
  void CancelIfStillHeld(StreamWatchdog* watchdog) {
    if (watch_ != nullptr) return;
    watchdog_ = watchdog;
    watch_ = watchdog->Watch([handle = handle_] { Cancel(*handle); });
  }

  // From OnDone: the call is gone.
  void Detach() {
    {
      absl::MutexLock lock(&handle_->mu);
      handle_->context = nullptr;
    }
    if (watch_ != nullptr) {
      watchdog_->Unwatch(watch_);
      watch_ = nullptr;
    }
  }

 private:
  struct Handle {
    absl::Mutex mu;
    grpc::CallbackServerContext* context ABSL_GUARDED_BY(mu) = nullptr;
  };
  static void Cancel(Handle& h) {
    absl::MutexLock lock(&h.mu);
    if (h.context != nullptr) h.context->TryCancel();
  }

  const std::shared_ptr<Handle> handle_;
  StreamWatchdog* watchdog_ = nullptr;
  StreamWatchdog::Handle watch_;
};

// Takes the writer's next message encoded as an asgd.v1.PullChunk; false
// once every one was given.
bool NextPullBuffer(PullWriter* writer, grpc::ByteBuffer* buffer);

// The reply to a push the store answered.
grpc::ByteBuffer PushReplyOf(const PushResult& r);

// Status of a stream the server ends between pushes or pulls: OK (idle for
// the stream idle timeout), or UNAVAILABLE when the server is shutting down.
absl::Status StreamEnd(const GrpcParameterService* service);

}  // namespace asgd

#endif  // ASGD_SERVER_GRPC_CALL_H_
