#include "server/grpc_service.h"

#include <algorithm>
#include <memory>
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

class PullReactor : public grpc::ServerWriteReactor<grpc::ByteBuffer> {
 public:
  // `request` is the parsed request, or the error to finish with.
  PullReactor(ParamStore* store, ServerMetrics* metrics,
              const absl::StatusOr<asgd::v1::PullRequest>& request)
      : timer_(metrics, RpcMethod::kPull), store_(store) {
    if (!request.ok()) {
      FinishCall(ToGrpcStatus(request.status()));
      return;
    }
    if (!IsKnownWireDtype(request->dtype())) {
      FinishCall(grpc::Status(
          grpc::StatusCode::INVALID_ARGUMENT,
          absl::StrCat("pull asks for an unknown wire dtype ",
                       static_cast<int>(request->dtype()))));
      return;
    }
    dtype_ = static_cast<WireDtype>(request->dtype());
    chunks_ = PlanChunks(store->layout(), store->range(),
                         store->options().max_chunk_elements);
    version_ = store->version();
    snapshot_ = store->SnapshotForPull(request->worker_id());
    store_->CountPull();
    if (metrics != nullptr) metrics->OnPull();
    NextWrite();
  }

  void OnWriteDone(bool ok) override {
    if (!ok) {
      FinishCall(grpc::Status(grpc::StatusCode::CANCELLED, "pull write failed"));
      return;
    }
    NextWrite();
  }

  void OnDone() override { delete this; }

 private:
  ServerMetrics* metrics() const { return timer_.metrics(); }

  void FinishCall(const grpc::Status& status) {
    timer_.Done(status);
    Finish(status);
  }

  void NextWrite() {
    if (next_ == chunks_.size()) {
      FinishCall(grpc::Status::OK);
      return;
    }
    const ChunkRef& c = chunks_[next_++];
    const int64_t local = c.flat_begin - store_->range().begin;
    msg_ = EncodeChunkMessage(
        ChunkMessageKind::kPull, version_,
        store_->layout().tensors()[c.tensor].name, c.offset, dtype_, c.count,
        [&](char* out) {
          if (snapshot_ != nullptr) {
            EncodeFloats(snapshot_->data() + local, c.count, dtype_, out);
          } else {
            store_->ReadEncoded(local, c.count, dtype_, out);
          }
        });
    if (metrics() != nullptr) {
      metrics()->OnBytesSent(c.count * WireBytes(dtype_));
    }
    StartWrite(&msg_);
  }

  RpcTimer timer_;
  ParamStore* const store_;
  WireDtype dtype_ = WireDtype::kFloat32;
  std::vector<ChunkRef> chunks_;
  uint64_t version_ = 0;
  // Set when the store keeps the worker's model for delay compensation: the
  // pull then serves exactly that copy.
  std::shared_ptr<const std::vector<float>> snapshot_;
  size_t next_ = 0;
  grpc::ByteBuffer msg_;
};

// One push stream: every message read is decoded and goes to the
// PushAssembler; the first invalid one finishes the call (INVALID_ARGUMENT,
// counted by reason); a valid commit hands the staged update to the store,
// and the store's callback finishes the call once every shard applied it.
//
// Three threads can want to finish the call: a gRPC thread in OnReadDone, the
// watchdog's (a stalled stream) and a shard thread (the store's callback).
// `state_->mu` orders them: whoever finishes first sets finished_, the others
// then do nothing. The watchdog reaches the reactor only through `state_`,
// whose pointer OnDone clears before the reactor is deleted. Finish() is
// safe under the lock: gRPC never runs OnDone inline from it.
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
        peer_(context->peer()),
        assembler_(store),
        state_(std::make_shared<State>()) {
    absl::MutexLock lock(&state_->mu);
    state_->reactor = this;
    admitted_ = service_->AdmitPush(peer_);
    if (!admitted_) {
      store_->CountRejected(RejectReason::kPeerLimit);
      FinishLocked(WithRefusal(
          absl::UnavailableError(
              "server busy: this client address has too many pushes in "
              "flight; retry after one of them ends"),
          Refusal::kPeerLimit));
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
      service_->watchdog()->Unwatch(watch_);
      // The received slices are no longer needed while the update is
      // applied.
      buffer_.Clear();
      received_.slices.clear();
      request = assembler_.TakeRequest();
    }
    // Outside the lock: the store may call back at once (a stale drop).
    const absl::Status status =
        store_->Submit(std::move(request), [this](const PushResult& r) {
          absl::MutexLock lock(&state_->mu);
          if (!r.error.ok()) {
            FinishLocked(r.error);
            return;
          }
          PushReply reply;
          reply.set_result(r.applied ? PushReply::APPLIED
                                     : PushReply::DROPPED_STALE);
          reply.set_staleness(r.staleness);
          reply.set_model_version(r.version);
          reply.set_pull_required(!r.applied);
          *reply_ = SerializeToByteBuffer(reply);
          FinishLocked(absl::OkStatus());
        });
    if (!status.ok()) {
      absl::MutexLock lock(&state_->mu);
      FinishLocked(status);  // Submit counted it
    }
  }

  void OnDone() override {
    {
      absl::MutexLock lock(&state_->mu);
      state_->reactor = nullptr;
    }
    delete this;
  }

 private:
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
    if (admitted_) {
      service_->ReleasePush(peer_);
      admitted_ = false;
    }
    const grpc::Status g = ToGrpcStatus(status, context_);
    timer_.Done(g);
    Finish(g);
  }

  RpcTimer timer_;
  GrpcParameterService* const service_;
  ParamStore* const store_;
  grpc::CallbackServerContext* const context_;
  grpc::ByteBuffer* const reply_;
  const std::string peer_;
  bool admitted_ ABSL_GUARDED_BY(state_->mu) = false;
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

// Finishes a unary call at once with `status` (and the reply when OK).
grpc::ServerUnaryReactor* FinishUnary(grpc::CallbackServerContext* context,
                                      RpcTimer& timer,
                                      const absl::Status& status) {
  auto* reactor = context->DefaultReactor();
  const grpc::Status g = ToGrpcStatus(status, context);
  timer.Done(g);
  reactor->Finish(g);
  return reactor;
}

}  // namespace

std::string PeerAddress(const std::string& peer) {
  const size_t colon = peer.rfind(':');
  const size_t bracket = peer.rfind(']');
  if (colon == std::string::npos ||
      (bracket != std::string::npos && colon < bracket)) {
    return peer;
  }
  return peer.substr(0, colon);
}

GrpcParameterService::GrpcParameterService(ParamStore* store, BatchPool* pool,
                                           ServerMetrics* metrics,
                                           const GrpcServiceOptions& options)
    : store_(store),
      pool_(pool),
      metrics_(metrics),
      options_(options),
      watchdog_(options.push_progress_timeout) {
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

bool GrpcParameterService::AdmitPush(const std::string& peer) {
  absl::MutexLock lock(&peers_mu_);
  int& count = pushes_per_peer_[PeerAddress(peer)];
  if (options_.max_pushes_per_peer > 0 &&
      count >= options_.max_pushes_per_peer) {
    if (count == 0) pushes_per_peer_.erase(PeerAddress(peer));
    return false;
  }
  ++count;
  ++pushes_in_flight_;
  return true;
}

void GrpcParameterService::ReleasePush(const std::string& peer) {
  absl::MutexLock lock(&peers_mu_);
  auto it = pushes_per_peer_.find(PeerAddress(peer));
  if (it == pushes_per_peer_.end()) return;
  if (--it->second <= 0) pushes_per_peer_.erase(it);
  --pushes_in_flight_;
}

int GrpcParameterService::pushes_in_flight() const {
  absl::MutexLock lock(&peers_mu_);
  return pushes_in_flight_;
}

grpc::ServerUnaryReactor* GrpcParameterService::DescribeModel(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* request,
    grpc::ByteBuffer* reply) {
  RpcTimer timer(metrics_, RpcMethod::kDescribeModel);
  asgd::v1::DescribeModelRequest parsed;
  absl::Status status =
      ParseFromByteBuffer(*request, &parsed, "DescribeModel request");
  if (status.ok()) {
    asgd::v1::ModelDescription response = description_;
    response.set_model_version(store_->version());
    *reply = SerializeToByteBuffer(response);
  }
  return FinishUnary(context, timer, status);
}

grpc::ServerWriteReactor<grpc::ByteBuffer>* GrpcParameterService::Pull(
    grpc::CallbackServerContext* /*context*/, const grpc::ByteBuffer* request) {
  asgd::v1::PullRequest parsed;
  absl::Status status = ParseFromByteBuffer(*request, &parsed, "pull request");
  if (!status.ok()) return new PullReactor(store_, metrics_, status);
  return new PullReactor(store_, metrics_, parsed);
}

grpc::ServerUnaryReactor* GrpcParameterService::FetchBatches(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* request,
    grpc::ByteBuffer* reply) {
  RpcTimer timer(metrics_, RpcMethod::kFetchBatches);
  asgd::v1::FetchBatchesRequest parsed;
  absl::Status status =
      ParseFromByteBuffer(*request, &parsed, "FetchBatches request");
  if (status.ok()) {
    absl::StatusOr<BatchGrant> grant =
        pool_->Take(parsed.worker_id(), parsed.num_frames(),
                    parsed.batch_size(), parsed.epochs(), parsed.count());
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
  return FinishUnary(context, timer, status);
}

grpc::ServerReadReactor<grpc::ByteBuffer>* GrpcParameterService::Push(
    grpc::CallbackServerContext* context, grpc::ByteBuffer* reply) {
  return new PushReactor(this, store_, metrics_, context, reply);
}

}  // namespace asgd
