#include "server/grpc_service.h"

#include <algorithm>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/chunking.h"
#include "common/grpc_status.h"
#include "common/refusal.h"
#include "common/tensor_wire.h"
#include "common/wire_codec.h"
#include "compression/grad_codec.h"
#include "server/delta_pulls.h"
#include "server/push_assembler.h"

namespace asgd {
namespace {

using asgd::v1::PushReply;

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
// calls alive from its reactor's construction to its deletion (OnDone), and
// among its client address's calls of its kind from Take() until Release(),
// when its status is sent. Used under its reactor's lock.
class CallPlace {
 public:
  CallPlace(CallAdmission* admission, CallKind kind, const std::string& peer)
      : admission_(admission), kind_(kind), address_(PeerAddress(peer)) {}
  CallPlace(const CallPlace&) = delete;
  CallPlace& operator=(const CallPlace&) = delete;
  ~CallPlace() {
    Release();
    if (entered_) admission_->Leave();
  }

  // OK, or the refusal to finish the call with (nothing counted).
  absl::Status Take() {
    if (!admission_->Enter()) {
      return WithRefusal(
          absl::UnavailableError(absl::StrCat(
              "server busy: it has the most calls in flight it takes (",
              admission_->limits().total,
              ", --max_calls) from all clients; retry after a backoff")),
          Refusal::kServerLimit);
    }
    entered_ = true;
    if (!admission_->Admit(kind_, address_)) {
      return WithRefusal(
          absl::UnavailableError(absl::StrCat(
              "server busy: this client address has too many ",
              KindName(), " in flight (", admission_->limits().per_peer,
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
      case CallKind::kPush: return "pushes";
      case CallKind::kPullStream: return "pull streams";
      case CallKind::kPull: return "pulls";
      case CallKind::kOther: return "calls";
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
RejectReason AdmissionReason(const absl::Status& refusal) {
  return RefusalOf(refusal) == Refusal::kServerLimit
             ? RejectReason::kServerLimit
             : RejectReason::kPeerLimit;
}

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
    return watchdog->Watch(
        [stalled = std::move(stalled), handle = handle_] {
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

// InvalidArgument unless a pull can be served in `dtype` (a wire dtype as
// sent).
absl::Status CheckPullDtype(int dtype) {
  if (IsKnownWireDtype(dtype)) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "pull asks for wire dtype ", dtype,
      IsCompressedWireDtype(dtype)
          ? ", a compressed gradient encoding (pushes only)"
          : ", which is unknown"));
}

// The messages of one pull: the server's range chunk by chunk, each copied
// from the live weights (or from the worker's DC-ASGD copy) when it is
// written, then (on a PullStream) the end-of-pull message. A delta pull's
// reply (DeltaPlan) instead sends the plan's base weights, if any, then each
// update's header and chunks, every message marked exact.
class PullWriter {
 public:
  PullWriter(ParamStore* store, ServerMetrics* metrics, uint64_t worker_id,
             WireDtype dtype, bool end_marker)
      : store_(store),
        metrics_(metrics),
        dtype_(dtype),
        end_marker_(end_marker),
        chunks_(PlanChunks(store->layout(), store->range(),
                           store->options().max_chunk_elements)),
        version_(store->version()),
        snapshot_(store->SnapshotForPull(worker_id)) {
    Count(ServerMetrics::PullForm::kWeights);
  }

  // A delta pull's reply (always on a PullStream, float32), ending with the
  // server's lineage.
  PullWriter(ParamStore* store, ServerMetrics* metrics, DeltaPlan plan,
             uint64_t lineage)
      : store_(store),
        metrics_(metrics),
        dtype_(WireDtype::kFloat32),
        end_marker_(true),
        chunks_(plan.base != nullptr
                    ? PlanChunks(store->layout(), store->range(),
                                 store->options().max_chunk_elements)
                    : std::vector<ChunkRef>()),
        version_(plan.version),
        plan_(std::move(plan)),
        lineage_(lineage) {
    Count(plan_->base != nullptr ? ServerMetrics::PullForm::kExactWeights
                                 : ServerMetrics::PullForm::kUpdates);
  }

  // The next message; false once every one was given.
  bool Next(grpc::ByteBuffer* msg) {
    if (next_ < chunks_.size()) {
      const ChunkRef& c = chunks_[next_++];
      ++sent_chunks_;
      const int64_t local = c.flat_begin - store_->range().begin;
      const std::string& name = store_->layout().tensors()[c.tensor].name;
      if (plan_.has_value()) {
        const float* from = plan_->base->weights.data() + local;
        *msg = EncodeExactPullChunk(
            version_, name, c.offset, static_cast<int>(WireDtype::kFloat32),
            c.count * int64_t{sizeof(float)}, [&](char* out) {
              std::memcpy(out, from, c.count * sizeof(float));
            });
      } else {
        *msg = EncodeChunkMessage(
            ChunkMessageKind::kPull, version_, name, c.offset, dtype_,
            c.count, [&](char* out) {
              if (snapshot_ != nullptr) {
                EncodeFloats(snapshot_->data() + local, c.count, dtype_, out);
              } else {
                store_->ReadEncoded(local, c.count, dtype_, out);
              }
            });
      }
      if (metrics_ != nullptr) {
        metrics_->OnBytesSent(c.count * WireBytes(dtype_));
      }
      return true;
    }
    if (plan_.has_value() && next_update_ < plan_->updates.size()) {
      const LoggedUpdate& u = *plan_->updates[next_update_];
      if (next_update_chunk_ < 0) {  // the update's header
        asgd::v1::DeltaUpdate header;
        header.set_version(u.version);
        header.set_learning_rate(u.learning_rate);
        header.set_weight_decay(u.weight_decay);
        header.set_num_chunks(u.chunks.size());
        *msg = EncodeDeltaUpdateHeader(version_, header);
        next_update_chunk_ = 0;
      } else {
        const LoggedUpdate::Chunk& c = u.chunks[next_update_chunk_];
        *msg = EncodeExactPullChunk(
            version_, "", c.offset, static_cast<int>(u.encoding), c.byte_size,
            [&](char* out) {
              std::memcpy(out, u.bytes.data() + c.byte_begin, c.byte_size);
            });
        ++sent_chunks_;
        if (metrics_ != nullptr) metrics_->OnBytesSent(c.byte_size);
        if (++next_update_chunk_ == static_cast<int64_t>(u.chunks.size())) {
          ++next_update_;
          next_update_chunk_ = -1;
        }
      }
      return true;
    }
    if (!end_marker_) return false;
    end_marker_ = false;
    *msg = EncodeEndOfPull(version_, sent_chunks_, plan_.has_value(),
                           plan_.has_value() ? lineage_ : 0);
    return true;
  }

 private:
  void Count(ServerMetrics::PullForm form) {
    store_->CountPull();
    if (form == ServerMetrics::PullForm::kUpdates) store_->CountUpdatePull();
    if (metrics_ == nullptr) return;
    metrics_->OnPull();
    metrics_->OnPullForm(form);
  }

  ParamStore* const store_;
  ServerMetrics* const metrics_;
  const WireDtype dtype_;
  bool end_marker_;
  const std::vector<ChunkRef> chunks_;
  const uint64_t version_;
  // Set when the store keeps the worker's model for delay compensation: the
  // pull then serves exactly that copy.
  const std::shared_ptr<const std::vector<float>> snapshot_;
  // A delta pull's reply.
  std::optional<DeltaPlan> plan_;
  uint64_t lineage_ = 0;
  size_t next_ = 0;
  size_t next_update_ = 0;
  int64_t next_update_chunk_ = -1;  // -1: the header is next
  uint64_t sent_chunks_ = 0;        // messages with a TensorChunk
};

// One per-call pull (see the lifecycle in grpc_service.h). Locking as
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
    FinishLocked(absl::DeadlineExceededError(absl::StrCat(
        "the client read nothing of its pull for ",
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
    if (!writer_->Next(&msg_)) {
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

// The reply to a push the store answered.
grpc::ByteBuffer PushReplyOf(const PushResult& r) {
  PushReply reply;
  reply.set_result(r.applied ? PushReply::APPLIED : PushReply::DROPPED_STALE);
  reply.set_staleness(r.staleness);
  reply.set_model_version(r.version);
  reply.set_pull_required(!r.applied);
  return SerializeToByteBuffer(reply);
}

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
  grpc::ByteBuffer buffer_;    // the message being read
  ReceivedMessage received_;   // its slices, which msg_ points into
  PushMessage msg_;
  const std::shared_ptr<State> state_;
  bool finished_ ABSL_GUARDED_BY(state_->mu) = false;
  bool committed_ ABSL_GUARDED_BY(state_->mu) = false;
};

// Status of a stream the server ends between pushes or pulls.
absl::Status StreamEnd(const GrpcParameterService* service) {
  if (service->shutting_down()) {
    return absl::UnavailableError("server shutting down");
  }
  return absl::OkStatus();  // idle for the stream idle timeout
}

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

// Many pushes on one stream (see the lifecycle in grpc_service.h; locking as
// StreamReactor).
class PushStreamReactor : public StreamReactor<PushStreamReactor> {
 public:
  PushStreamReactor(GrpcParameterService* service, ParamStore* store,
                    ServerMetrics* metrics,
                    grpc::CallbackServerContext* context)
      : StreamReactor(service, metrics, RpcMethod::kPushStream,
                      CallKind::kPush, context),
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
      FinishLocked(absl::DeadlineExceededError(absl::StrCat(
          "the client read no reply for ",
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

// Many pulls on one stream (see the lifecycle in grpc_service.h; locking as
// StreamReactor).
class PullStreamReactor : public StreamReactor<PullStreamReactor> {
 public:
  PullStreamReactor(GrpcParameterService* service, ParamStore* store,
                    ServerMetrics* metrics,
                    grpc::CallbackServerContext* context)
      : StreamReactor(service, metrics, RpcMethod::kPullStream,
                      CallKind::kPullStream, context),
        store_(store),
        metrics_(metrics) {
    absl::MutexLock lock(&state_->mu);
    if (absl::Status status = AdmitLocked(); !status.ok()) {
      FinishLocked(status);
      return;
    }
    WaitForRequestLocked();
  }

  void OnReadDone(bool ok) override {
    absl::ReleasableMutexLock lock(&state_->mu);
    if (finished_) return;
    if (!ok) {
      FinishLocked(absl::OkStatus());  // the client ended its side
      return;
    }
    StopIdleWatchLocked();
    asgd::v1::PullRequest request;
    absl::Status status = ParseFromByteBuffer(request_, &request, "pull request");
    if (status.ok()) status = CheckPullDtype(request.dtype());
    if (status.ok() && request.delta()) status = CheckDeltaRequest(request);
    if (!status.ok()) {
      FinishLocked(status);
      return;
    }
    WatchProgressLocked();
    if (request.delta()) {
      DeltaPlan plan;
      switch (service_->delta_pulls()->Plan(request.has_copy(),
                                            request.model_version(),
                                            request.lineage(), &plan)) {
        case DeltaPulls::Answer::kPlan:
          writer_.emplace(store_, metrics_, std::move(plan),
                          service_->delta_pulls()->lineage());
          WriteNextLocked();
          return;
        case DeltaPulls::Answer::kNeedBase: {
          // Answered when the base is taken (on a shard thread, or at once
          // when none can be), through state_, outside this lock: the
          // reactor may end meanwhile (the progress watchdog).
          waiting_for_base_ = true;
          worker_id_ = request.worker_id();
          DeltaPulls* const delta = service_->delta_pulls();
          std::shared_ptr<State> state = state_;
          lock.Release();
          delta->RequestBase([state](std::optional<DeltaPlan> plan) {
            absl::MutexLock lock(&state->mu);
            if (state->reactor != nullptr) {
              state->reactor->BaseReadyLocked(std::move(plan));
            }
          });
          return;
        }
        case DeltaPulls::Answer::kWeights:
          break;
      }
    }
    writer_.emplace(store_, metrics_, request.worker_id(),
                    static_cast<WireDtype>(request.dtype()),
                    /*end_marker=*/true);
    WriteNextLocked();
  }

  void OnWriteDone(bool ok) override {
    absl::MutexLock lock(&state_->mu);
    if (finished_) return;
    if (!ok) {
      FinishLocked(absl::CancelledError("pull write failed"));
      return;
    }
    TouchProgressLocked();
    WriteNextLocked();
  }

 private:
  friend class StreamReactor<PullStreamReactor>;

  void WriteNextLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(state_->mu) {
    if (writer_->Next(&msg_)) {
      StartWrite(&msg_);
      return;
    }
    // The pull is complete: idle again.
    writer_.reset();
    msg_.Clear();
    StopProgressWatchLocked();
    WaitForRequestLocked();
  }

  // InvalidArgument unless this server can answer the delta request.
  absl::Status CheckDeltaRequest(const asgd::v1::PullRequest& request) const {
    if (service_->delta_pulls() == nullptr) {
      return absl::InvalidArgumentError(
          "this server does not answer delta pulls (ModelDescription."
          "delta_pulls is false: its optimizer keeps momentum or delay "
          "compensation, it trains synchronously, or --delta_log_mb is 0)");
    }
    if (request.dtype() != asgd::v1::FLOAT32) {
      return absl::InvalidArgumentError(
          "a delta pull sends float32 weights and updates; ask for FLOAT32");
    }
    return absl::OkStatus();
  }

  // The base a delta pull waited for is taken (or none could be: weights).
  void BaseReadyLocked(std::optional<DeltaPlan> plan)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(state_->mu) {
    if (finished_ || !waiting_for_base_) return;
    waiting_for_base_ = false;
    if (plan.has_value()) {
      writer_.emplace(store_, metrics_, std::move(*plan),
                      service_->delta_pulls()->lineage());
    } else {
      writer_.emplace(store_, metrics_, worker_id_, WireDtype::kFloat32,
                      /*end_marker=*/true);
    }
    TouchProgressLocked();
    WriteNextLocked();
  }

  void WaitForRequestLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(state_->mu) {
    if (!WatchIdleLocked()) {
      FinishLocked(StreamEnd(service_));
      return;
    }
    StartRead(&request_);
  }

  void IdleLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(state_->mu) {
    if (finished_ || writer_.has_value() || waiting_for_base_) return;
    FinishLocked(StreamEnd(service_));
  }

  // True when the stream must be cancelled too (see WatchProgressLocked).
  bool StalledLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(state_->mu) {
    if (finished_ || (!writer_.has_value() && !waiting_for_base_)) {
      return false;
    }
    if (waiting_for_base_) {
      FinishLocked(absl::DeadlineExceededError(absl::StrCat(
          "the consistent copy of the weights for a delta pull took longer "
          "than ",
          absl::FormatDuration(service_->watchdog()->timeout()),
          "; stream ended by the server")));
      return false;
    }
    FinishLocked(absl::DeadlineExceededError(
        absl::StrCat("the client read nothing of its pull for ",
                     absl::FormatDuration(service_->watchdog()->timeout()),
                     "; stream ended by the server")));
    return true;
  }

  void FinishLocked(const absl::Status& status)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(state_->mu) {
    if (finished_) return;
    writer_.reset();
    EndLocked(status);
  }

  ParamStore* const store_;
  ServerMetrics* const metrics_;
  grpc::ByteBuffer request_;
  std::optional<PullWriter> writer_;  // while a pull is written
  // A delta pull waiting for a base (DeltaPulls::RequestBase).
  bool waiting_for_base_ ABSL_GUARDED_BY(state_->mu) = false;
  uint64_t worker_id_ = 0;
  grpc::ByteBuffer msg_;
};

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

}  // namespace

GrpcParameterService::GrpcParameterService(ParamStore* store, BatchPool* pool,
                                           ServerMetrics* metrics,
                                           const GrpcServiceOptions& options)
    : store_(store),
      pool_(pool),
      metrics_(metrics),
      options_(options),
      watchdog_(options.push_progress_timeout),
      idle_watchdog_(options.stream_idle_timeout),
      admission_(CallLimits{options.max_pushes_per_peer, options.max_calls}) {
  const ModelLayout& layout = store->layout();
  for (size_t t = 0; t < layout.tensors().size(); ++t) {
    auto* info = description_.add_tensors();
    info->set_name(layout.tensors()[t].name);
    for (int64_t d : layout.tensors()[t].shape) info->add_shape(d);
    for (int s = 0; s < layout.num_servers(); ++s) {
      for (int k = 0; k < layout.num_shards(); ++k) {
        for (const Slice& slice : layout.SlicesOf(layout.ShardRange(s, k))) {
          if (slice.tensor != static_cast<int>(t)) continue;
          auto* a = info->add_slices();
          a->set_server_index(s);
          a->set_shard_index(k);
          a->set_begin(slice.begin);
          a->set_end(slice.end);
        }
      }
    }
  }
  description_.set_server_index(store->server_index());
  description_.set_num_servers(layout.num_servers());
  description_.set_num_shards(layout.num_shards());
  description_.set_layout_fingerprint(layout.Fingerprint());
  description_.set_max_chunk_elements(store->options().max_chunk_elements);
  description_.add_wire_dtypes(asgd::v1::FLOAT32);
  description_.add_wire_dtypes(asgd::v1::BFLOAT16);
  description_.add_push_dtypes(asgd::v1::FLOAT32);
  description_.add_push_dtypes(asgd::v1::BFLOAT16);
  if (store->update_log() != nullptr) {
    delta_pulls_ = std::make_unique<DeltaPulls>(
        store, options.max_delta_base_mb * (int64_t{1} << 20));
    description_.set_delta_pulls(true);
  }
  if (store->options().compressed_pushes) {
    description_.add_push_dtypes(asgd::v1::ONE_BIT);
    description_.add_push_dtypes(asgd::v1::TOP_K);
    description_.set_compressed_format_version(kGradCodecVersion);
    description_.set_max_compressed_chunk_elements(static_cast<uint64_t>(
        store->options().max_compressed_chunk_elements));
  }
  description_.set_streams(true);
  description_.set_max_push_minibatches(
      static_cast<uint32_t>(store->options().max_push_minibatches));
  if (!description_.mutable_model()->ParseFromString(
          store->options().model_spec)) {
    description_.clear_model();
  }
  for (const auto& [key, value] : store->options().attributes) {
    (*description_.mutable_model_attributes())[key] = value;
  }
}

int GrpcParameterService::pushes_in_flight() const {
  return admission_.open(CallKind::kPush);
}

int GrpcParameterService::pull_streams_open() const {
  return admission_.open(CallKind::kPullStream);
}

int GrpcParameterService::pulls_in_flight() const {
  return admission_.open(CallKind::kPull);
}

void GrpcParameterService::BeginShutdown() {
  shutting_down_.store(true, std::memory_order_release);
  idle_watchdog_.ExpireAll();
}

grpc::ServerUnaryReactor* GrpcParameterService::DescribeModel(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* request,
    grpc::ByteBuffer* reply) {
  auto* reactor = new UnaryReactor(this, metrics_, RpcMethod::kDescribeModel,
                                   context);
  absl::Status status = reactor->Admit();
  asgd::v1::DescribeModelRequest parsed;
  if (status.ok()) {
    status = ParseFromByteBuffer(*request, &parsed, "DescribeModel request");
  }
  if (status.ok()) {
    asgd::v1::ModelDescription response = description_;
    response.set_model_version(store_->version());
    *reply = SerializeToByteBuffer(response);
  }
  reactor->Answer(status);
  return reactor;
}

grpc::ServerWriteReactor<grpc::ByteBuffer>* GrpcParameterService::Pull(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* request) {
  asgd::v1::PullRequest parsed;
  absl::Status status = ParseFromByteBuffer(*request, &parsed, "pull request");
  if (!status.ok()) {
    return new PullReactor(this, store_, metrics_, context, status);
  }
  return new PullReactor(this, store_, metrics_, context, parsed);
}

grpc::ServerUnaryReactor* GrpcParameterService::FetchBatches(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* request,
    grpc::ByteBuffer* reply) {
  auto* reactor = new UnaryReactor(this, metrics_, RpcMethod::kFetchBatches,
                                   context);
  absl::Status status = reactor->Admit();
  asgd::v1::FetchBatchesRequest parsed;
  if (status.ok()) {
    status = ParseFromByteBuffer(*request, &parsed, "FetchBatches request");
  }
  if (status.ok()) {
    BatchRequest r;
    r.client = PeerAddress(context->peer());
    r.run_id = parsed.run_id();
    r.worker_id = parsed.worker_id();
    r.num_frames = parsed.num_frames();
    r.batch_size = parsed.batch_size();
    r.epochs = parsed.epochs();
    r.count = parsed.count();
    absl::StatusOr<BatchGrant> grant = pool_->Take(r);
    status = grant.status();
    if (grant.ok()) {
      asgd::v1::FetchBatchesReply out;
      for (uint64_t id : grant->batch_ids) out.add_batch_ids(id);
      out.set_batches_per_epoch(grant->batches_per_epoch);
      out.set_exhausted(grant->exhausted);
      out.set_model_version(store_->version());
      *reply = SerializeToByteBuffer(out);
    }
  }
  reactor->Answer(status);
  return reactor;
}

grpc::ServerReadReactor<grpc::ByteBuffer>* GrpcParameterService::Push(
    grpc::CallbackServerContext* context, grpc::ByteBuffer* reply) {
  return new PushReactor(this, store_, metrics_, context, reply);
}

grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>*
GrpcParameterService::PushStream(grpc::CallbackServerContext* context) {
  return new PushStreamReactor(this, store_, metrics_, context);
}

grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>*
GrpcParameterService::PullStream(grpc::CallbackServerContext* context) {
  return new PullStreamReactor(this, store_, metrics_, context);
}

}  // namespace asgd
