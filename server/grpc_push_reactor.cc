#include "server/grpc_push_reactor.h"

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
#include "server/push_assembler.h"

namespace asgd {
namespace {

using asgd::v1::PushReply;

// One push stream: every message read is decoded and goes to the
// PushAssembler; the first invalid one finishes the call (INVALID_ARGUMENT,
// counted by reason); a valid commit hands the staged update to the store,
// and the store's callback finishes the call once every shard applied it.
//
// Several threads can want to finish the call: a gRPC thread in OnReadDone
// or OnCancel (the client went away, or the server is stopping), the
// watchdog's (a stalled stream) and a shard thread (the store's callback).
// `state_->mu` orders them: whoever finishes first sets finished_, the others
// then do nothing. The watchdog and the store's callback reach the reactor
// only through `state_`, whose pointer OnDone clears before the reactor is
// deleted (a cancelled call can be gone before the store answers). Finish()
// is safe under the lock: gRPC never runs OnDone inline from it.
class PushReactor : public grpc::ServerReadReactor<grpc::ByteBuffer> {
 public:
  struct State {
    absl::Mutex mu;
    PushReactor* reactor ABSL_GUARDED_BY(mu);
  };

  PushReactor(GrpcParameterService* service, ParamStore* store,
              ServerMetrics* metrics, grpc::CallbackServerContext* context,
              grpc::ByteBuffer* reply)
      : timer_(metrics, RpcMethod::kPush),
        service_(service),
        store_(store),
        context_(context),
        reply_(reply),
        place_(service->admission(), CallKind::kPush, context->peer()),
        canceller_(context),
        assembler_(store),
        state_(std::make_shared<State>()) {
    absl::MutexLock lock(&state_->mu);
    state_->reactor = this;
    if (absl::Status status = place_.Take(); !status.ok()) {
      store_->CountRejected(AdmissionReason(status));
      FinishLocked(status);
      return;
    }
    watch_ = service_->watchdog()->Watch([state = state_] {
      absl::MutexLock lock(&state->mu);
      if (state->reactor != nullptr) state->reactor->StalledLocked();
    });
    StartRead(&buffer_);
  }

  void OnReadDone(bool ok) override {
    PushRequest request;
    {
      absl::MutexLock lock(&state_->mu);
      if (finished_) return;
      if (!ok) {
        // The stream ended before a commit (reads stop after one).
        const absl::Status status = assembler_.EndOfStream();
        if (!status.ok()) RejectLocked(status);
        return;
      }
      service_->watchdog()->Touch(watch_);
      absl::Status status = DecodePushChunk(buffer_, &received_, &msg_);
      if (!status.ok()) {
        // Not even protobuf: count it as a bad header (the stream is
        // unusable).
        store_->CountRejected(RejectReason::kBadHeader);
        FinishLocked(status);
        return;
      }
      const int64_t bytes_before = assembler_.chunk_bytes();
      status = assembler_.Add(msg_);
      if (timer_.metrics() != nullptr &&
          assembler_.chunk_bytes() != bytes_before) {
        timer_.metrics()->OnBytesReceived(assembler_.chunk_bytes() -
                                          bytes_before);
      }
      if (!status.ok()) {
        RejectLocked(status);
        return;
      }
      if (!assembler_.committed()) {
        StartRead(&buffer_);
        return;
      }
      // The client's part is done: no progress deadline while it is applied.
      committed_ = true;
      if (timer_.metrics() != nullptr) {
        timer_.metrics()->OnPushCommitted(assembler_.encoding(),
                                          assembler_.chunk_bytes());
      }
      service_->watchdog()->Unwatch(watch_);
      // The received slices are no longer needed while the update is
      // applied.
      buffer_.Clear();
      received_.slices.clear();
      request = assembler_.TakeRequest();
    }
    // Outside the lock: the store may call back at once (a stale drop). It
    // reaches the reactor through `state_`: a cancelled call may be gone.
    const absl::Status status = store_->Submit(
        std::move(request), [state = state_](const PushResult& r) {
          absl::MutexLock lock(&state->mu);
          if (state->reactor != nullptr) state->reactor->AnsweredLocked(r);
        });
    if (!status.ok()) {
      absl::MutexLock lock(&state_->mu);
      FinishLocked(status);  // Submit counted it
    }
  }

  // The client went away (or the server is stopping): finish now, even when
  // the store has not answered yet (a synchronous step may never come).
  // A push cut off before its commit is counted as incomplete here or in
  // OnReadDone, whichever gRPC runs first (the other then does nothing).
  void OnCancel() override {
    absl::MutexLock lock(&state_->mu);
    if (!finished_ && !assembler_.EndOfStream().ok()) {
      store_->CountRejected(assembler_.reject_reason());
    }
    FinishLocked(absl::CancelledError("push cancelled"));
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
  void AnsweredLocked(const PushResult& r)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(state_->mu) {
    if (!r.error.ok()) {
      FinishLocked(r.error);
      return;
    }
    *reply_ = PushReplyOf(r);
    FinishLocked(absl::OkStatus());
  }

  void StalledLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(state_->mu) {
    if (finished_ || committed_) return;
    store_->CountRejected(RejectReason::kStalled);
    FinishLocked(absl::DeadlineExceededError(
        absl::StrCat("push stream made no progress for ",
                     absl::FormatDuration(service_->watchdog()->timeout()),
                     "; ended by the server, nothing was applied")));
  }

  void RejectLocked(const absl::Status& status)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(state_->mu) {
    store_->CountRejected(assembler_.reject_reason());
    FinishLocked(status);
  }

  // Finishes the call once. What the stream held (its staging buffer, its
  // slot among the peer's pushes, its watch) is released here, not in
  // OnDone(), which gRPC may run later than the client sees the status.
  void FinishLocked(const absl::Status& status)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(state_->mu) {
    if (finished_) return;
    finished_ = true;
    assembler_.Abandon();
    if (watch_ != nullptr) service_->watchdog()->Unwatch(watch_);
    place_.Release();
    const grpc::Status g = ToGrpcStatus(status, context_);
    timer_.Done(g);
    Finish(g);
    // A client that reads nothing would keep the reply queued.
    canceller_.CancelIfStillHeld(service_->watchdog());
  }

  RpcTimer timer_;
  GrpcParameterService* const service_;
  ParamStore* const store_;
  grpc::CallbackServerContext* const context_;
  grpc::ByteBuffer* const reply_;
  CallPlace place_;
  Canceller canceller_;
  StreamWatchdog::Handle watch_;
  // Validates the stream and stages the values; released on any rejection.
  PushAssembler assembler_;
  grpc::ByteBuffer buffer_;   // the message being read
  ReceivedMessage received_;  // its slices, which msg_ points into
  PushMessage msg_;
  const std::shared_ptr<State> state_;
  bool finished_ ABSL_GUARDED_BY(state_->mu) = false;
  bool committed_ ABSL_GUARDED_BY(state_->mu) = false;
};

}  // namespace

grpc::ServerReadReactor<grpc::ByteBuffer>* NewPushReactor(
    GrpcParameterService* service, ParamStore* store, ServerMetrics* metrics,
    grpc::CallbackServerContext* context, grpc::ByteBuffer* reply) {
  return new PushReactor(service, store, metrics, context, reply);
}

}  // namespace asgd
