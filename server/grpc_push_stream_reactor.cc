#include "server/grpc_push_stream_reactor.h"

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
#include "server/grpc_stream_reactor.h"
#include "server/push_assembler.h"

namespace asgd {
namespace {

using asgd::v1::PushReply;

// Many pushes on one stream (see the lifecycle in grpc_push_stream_reactor.h;
// locking as StreamReactor).
class PushStreamReactor : public StreamReactor<PushStreamReactor> {
 public:
  PushStreamReactor(GrpcParameterService* service, ParamStore* store,
                    ServerMetrics* metrics,
                    grpc::CallbackServerContext* context)
      : StreamReactor(service, metrics, RpcMethod::kPushStream, CallKind::kPush,
                      context),
        store_(store) {
    absl::MutexLock lock(&state_->mu);
    if (absl::Status status = AdmitLocked(); !status.ok()) {
      store_->CountRejected(AdmissionReason(status));
      FinishLocked(status);
      return;
    }
    WaitForPushLocked();
  }

  void OnReadDone(bool ok) override {
    PushRequest request;
    {
      absl::MutexLock lock(&state_->mu);
      if (finished_) return;
      if (!ok) {
        // The client ended its side: between pushes that is the end of the
        // stream; inside one, the push is incomplete.
        absl::Status status;
        if (assembler_ != nullptr) status = assembler_->EndOfStream();
        if (!status.ok()) {
          RejectLocked(status);
        } else {
          FinishLocked(absl::OkStatus());
        }
        return;
      }
      if (assembler_ == nullptr) {
        // The first message of a push: from idle to receiving.
        StopIdleWatchLocked();
        WatchProgressLocked();
        assembler_ = std::make_unique<PushAssembler>(store_);
        if (timer_.metrics() != nullptr) timer_.metrics()->OnPushStarted();
      } else {
        TouchProgressLocked();
      }
      absl::Status status = DecodePushChunk(buffer_, &received_, &msg_);
      if (!status.ok()) {
        store_->CountRejected(RejectReason::kBadHeader);
        FinishLocked(status);
        return;
      }
      const int64_t bytes_before = assembler_->chunk_bytes();
      status = assembler_->Add(msg_);
      if (timer_.metrics() != nullptr &&
          assembler_->chunk_bytes() != bytes_before) {
        timer_.metrics()->OnBytesReceived(assembler_->chunk_bytes() -
                                          bytes_before);
      }
      if (!status.ok()) {
        RejectLocked(status);
        return;
      }
      if (!assembler_->committed()) {
        StartRead(&buffer_);
        return;
      }
      // Received whole: no deadline while it is applied and answered.
      StopProgressWatchLocked();
      if (timer_.metrics() != nullptr) {
        timer_.metrics()->OnPushCommitted(assembler_->encoding(),
                                          assembler_->chunk_bytes());
      }
      buffer_.Clear();
      received_.slices.clear();
      request = assembler_->TakeRequest();
    }
    // Outside the lock: the store may call back at once (a stale drop). It
    // reaches the reactor through `state_`: a cancelled stream may be gone.
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
  // the store has not answered the push yet. A push cut off before its
  // commit is counted as incomplete, as in OnReadDone.
  void OnCancel() override {
    absl::MutexLock lock(&state_->mu);
    if (!finished_ && assembler_ != nullptr &&
        !assembler_->EndOfStream().ok()) {
      store_->CountRejected(assembler_->reject_reason());
    }
    FinishLocked(absl::CancelledError("push stream cancelled"));
  }

  void OnWriteDone(bool ok) override {
    absl::MutexLock lock(&state_->mu);
    if (finished_) return;
    StopProgressWatchLocked();
    replying_ = false;
    if (!ok) {
      FinishLocked(absl::CancelledError("push reply write failed"));
      return;
    }
    assembler_.reset();
    WaitForPushLocked();
  }

 private:
  friend class StreamReactor<PushStreamReactor>;

  // Idle: wait for the next push's first message (or end the stream when
  // the server is shutting down).
  void WaitForPushLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(state_->mu) {
    if (!WatchIdleLocked()) {
      FinishLocked(StreamEnd(service_));
      return;
    }
    StartRead(&buffer_);
  }

  void AnsweredLocked(const PushResult& r)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(state_->mu) {
    if (finished_) return;
    if (!r.error.ok()) {
      FinishLocked(r.error);
      return;
    }
    reply_ = PushReplyOf(r);
    // Replying: a client that does not read its reply for the progress
    // timeout is cut off (it would hold its place forever).
    replying_ = true;
    WatchProgressLocked();
    StartWrite(&reply_);
  }

  void IdleLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(state_->mu) {
    if (finished_ || assembler_ != nullptr) return;
    FinishLocked(StreamEnd(service_));
  }

  // True when the stream must be cancelled too (see WatchProgressLocked).
  bool StalledLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(state_->mu) {
    if (finished_ || assembler_ == nullptr) return false;
    if (replying_) {
      FinishLocked(absl::DeadlineExceededError(
          absl::StrCat("the client read no reply for ",
                       absl::FormatDuration(service_->watchdog()->timeout()),
                       "; stream ended by the server (the push was applied)")));
      return true;
    }
    if (assembler_->committed()) return false;
    store_->CountRejected(RejectReason::kStalled);
    FinishLocked(absl::DeadlineExceededError(
        absl::StrCat("push made no progress for ",
                     absl::FormatDuration(service_->watchdog()->timeout()),
                     "; stream ended by the server, nothing was applied")));
    return false;
  }

  void RejectLocked(const absl::Status& status)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(state_->mu) {
    store_->CountRejected(assembler_->reject_reason());
    FinishLocked(status);
  }

  // Ends the stream once, releasing what it held.
  void FinishLocked(const absl::Status& status)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(state_->mu) {
    if (finished_) return;
    if (assembler_ != nullptr) assembler_->Abandon();
    EndLocked(status);
  }

  ParamStore* const store_;
  // The push being received (null while idle); released on any rejection.
  std::unique_ptr<PushAssembler> assembler_;
  grpc::ByteBuffer buffer_;   // the message being read
  ReceivedMessage received_;  // its slices, which msg_ points into
  PushMessage msg_;
  grpc::ByteBuffer reply_;
  bool replying_ ABSL_GUARDED_BY(state_->mu) = false;  // a reply is written
};

}  // namespace

grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>*
NewPushStreamReactor(GrpcParameterService* service, ParamStore* store,
                     ServerMetrics* metrics,
                     grpc::CallbackServerContext* context) {
  return new PushStreamReactor(service, store, metrics, context);
}

}  // namespace asgd
