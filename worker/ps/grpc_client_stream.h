// RawCall and ClientStream: the parameter client's gRPC calls
// (grpc_param_client.cc), one raw (ByteBuffer) bidirectional call driven
// synchronously with deadlines, and the long-lived stream that holds one.
//
// Thread-safety: one thread at a time per call (the client holds a server's
// pull or push lock while it uses that server's stream).
#ifndef ASGD_WORKER_PS_GRPC_CLIENT_STREAM_H_
#define ASGD_WORKER_PS_GRPC_CLIENT_STREAM_H_

#include <memory>
#include <string>

#include "absl/time/time.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/grpcpp.h"

namespace asgd {

// One call of a raw (ByteBuffer) method, bidirectional, driven synchronously
// on the calling thread through a private completion queue: one operation at
// a time, each waiting at most until its deadline. An operation that misses
// its deadline cancels the call (timed_out() then says so): the call is dead
// and Finish() reports how it ended.
class RawCall {
 public:
  RawCall(grpc::GenericStub* stub, grpc::ClientContext* ctx,
          const std::string& method, absl::Time deadline)
      : ctx_(ctx), call_(stub->PrepareCall(ctx, method, &cq_)) {
    call_->StartCall(this);
    ok_ = Wait(deadline);
  }

  ~RawCall() {
    if (!finished_) {
      ctx_->TryCancel();
      Finish(absl::InfiniteFuture());
    }
    cq_.Shutdown();
    void* tag;
    bool ok;
    while (cq_.Next(&tag, &ok)) {
    }
  }

  RawCall(const RawCall&) = delete;
  RawCall& operator=(const RawCall&) = delete;

  // False once the stream is broken; Finish() then says why.
  bool Write(const grpc::ByteBuffer& msg, absl::Time deadline) {
    if (ok_) {
      call_->Write(msg, this);
      ok_ = Wait(deadline);
    }
    return ok_;
  }
  // False at the end of the stream (or when it broke).
  bool Read(grpc::ByteBuffer* msg, absl::Time deadline) {
    if (!ok_) return false;
    call_->Read(msg, this);
    ok_ = Wait(deadline);
    return ok_;
  }
  // Cancels the call (its next Finish() reports CANCELLED unless the server
  // finished first).
  void Cancel() {
    ctx_->TryCancel();
    ok_ = false;
  }
  // How the call ended (DEADLINE_EXCEEDED after an operation timed out).
  // Past `deadline` the call is cancelled, which ends it at once.
  grpc::Status Finish(absl::Time deadline) {
    if (finished_) return status_;
    call_->Finish(&status_, this);
    Wait(deadline);
    finished_ = true;
    ok_ = false;
    if (timed_out_) {
      status_ = grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED,
                             "no answer within the call's deadline");
    }
    return status_;
  }
  bool ok() const { return ok_; }
  bool timed_out() const { return timed_out_; }
  const grpc::ClientContext& context() const { return *ctx_; }

 private:
  // Waits for the operation in flight; false when it failed or missed
  // `deadline` (then the call is cancelled and the operation collected).
  bool Wait(absl::Time deadline) {
    void* tag;
    bool ok = false;
    switch (cq_.AsyncNext(&tag, &ok, absl::ToChronoTime(deadline))) {
      case grpc::CompletionQueue::GOT_EVENT:
        return ok;
      case grpc::CompletionQueue::TIMEOUT:
        // Cancel, then collect the operation, which now ends at once.
        timed_out_ = true;
        ctx_->TryCancel();
        cq_.Next(&tag, &ok);
        return false;
      case grpc::CompletionQueue::SHUTDOWN:
        break;
    }
    return false;
  }

  grpc::ClientContext* const ctx_;
  grpc::CompletionQueue cq_;
  std::unique_ptr<grpc::GenericClientAsyncReaderWriter> call_;
  bool ok_ = false;
  bool finished_ = false;
  bool timed_out_ = false;
  grpc::Status status_;
};

// A long-lived PushStream or PullStream to one server: its context and call.
class ClientStream {
 public:
  ClientStream(grpc::GenericStub* stub, const std::string& method,
               bool wait_for_ready, absl::Time deadline) {
    ctx_.set_wait_for_ready(wait_for_ready);
    call_ = std::make_unique<RawCall>(stub, &ctx_, method, deadline);
  }
  RawCall& call() { return *call_; }

 private:
  grpc::ClientContext ctx_;
  std::unique_ptr<RawCall> call_;
};

}  // namespace asgd

#endif  // ASGD_WORKER_PS_GRPC_CLIENT_STREAM_H_
