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
class PushReactor : public grpc::ServerReadReactor<grpc::ByteBuffer> {
 public:
  PushReactor(ParamStore* store, ServerMetrics* metrics,
              grpc::ByteBuffer* reply)
      : timer_(metrics, RpcMethod::kPush),
        store_(store),
        reply_(reply),
        assembler_(store) {
    StartRead(&buffer_);
  }

  void OnReadDone(bool ok) override {
    if (!ok) {
      // The stream ended before a commit (reads stop after one).
      const absl::Status status = assembler_.EndOfStream();
      if (!status.ok()) Reject(status);
      return;
    }
    absl::Status status = DecodePushChunk(buffer_, &received_, &msg_);
    if (!status.ok()) {
      // Not even protobuf: count it as a bad header (the stream is unusable).
      store_->CountRejected(RejectReason::kBadHeader);
      FinishCall(ToGrpcStatus(status));
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
      Reject(status);
      return;
    }
    if (!assembler_.committed()) {
      StartRead(&buffer_);
      return;
    }
    // The received slices are no longer needed while the update is applied.
    buffer_.Clear();
    received_.slices.clear();
    status =
        store_->Submit(assembler_.TakeRequest(), [this](const PushResult& r) {
          PushReply reply;
          reply.set_result(r.applied ? PushReply::APPLIED
                                     : PushReply::DROPPED_STALE);
          reply.set_staleness(r.staleness);
          reply.set_model_version(r.version);
          reply.set_pull_required(!r.applied);
          *reply_ = SerializeToByteBuffer(reply);
          FinishCall(grpc::Status::OK);
        });
    if (!status.ok()) FinishCall(ToGrpcStatus(status));  // Submit counted it
  }

  void OnDone() override { delete this; }

 private:
  void Reject(const absl::Status& status) {
    store_->CountRejected(assembler_.reject_reason());
    FinishCall(ToGrpcStatus(status));
  }

  void FinishCall(const grpc::Status& status) {
    timer_.Done(status);
    Finish(status);
  }

  RpcTimer timer_;
  ParamStore* const store_;
  grpc::ByteBuffer* const reply_;
  // Validates the stream and stages the values; released on any rejection.
  PushAssembler assembler_;
  grpc::ByteBuffer buffer_;    // the message being read
  ReceivedMessage received_;   // its slices, which msg_ points into
  PushMessage msg_;
};

}  // namespace

GrpcParameterService::GrpcParameterService(ParamStore* store, BatchPool* pool,
                                           ServerMetrics* metrics)
    : store_(store), pool_(pool), metrics_(metrics) {
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
  if (!description_.mutable_model()->ParseFromString(
          store->options().model_spec)) {
    description_.clear_model();
  }
  for (const auto& [key, value] : store->options().attributes) {
    (*description_.mutable_model_attributes())[key] = value;
  }
}

grpc::ServerUnaryReactor* GrpcParameterService::DescribeModel(
    grpc::CallbackServerContext* context,
    const asgd::v1::DescribeModelRequest* /*request*/,
    asgd::v1::ModelDescription* response) {
  RpcTimer timer(metrics_, RpcMethod::kDescribeModel);
  *response = description_;
  response->set_model_version(store_->version());
  auto* reactor = context->DefaultReactor();
  timer.Done(grpc::Status::OK);
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

grpc::ServerWriteReactor<grpc::ByteBuffer>* GrpcParameterService::Pull(
    grpc::CallbackServerContext* /*context*/, const grpc::ByteBuffer* request) {
  asgd::v1::PullRequest parsed;
  absl::Status status = ParseFromByteBuffer(*request, &parsed, "pull request");
  if (!status.ok()) return new PullReactor(store_, metrics_, status);
  return new PullReactor(store_, metrics_, parsed);
}

grpc::ServerUnaryReactor* GrpcParameterService::FetchBatches(
    grpc::CallbackServerContext* context,
    const asgd::v1::FetchBatchesRequest* request,
    asgd::v1::FetchBatchesReply* reply) {
  RpcTimer timer(metrics_, RpcMethod::kFetchBatches);
  auto* reactor = context->DefaultReactor();
  absl::StatusOr<BatchGrant> grant = pool_->Take(
      request->worker_id(), request->num_frames(), request->batch_size(),
      request->epochs(), request->count());
  if (!grant.ok()) {
    const grpc::Status status = ToGrpcStatus(grant.status());
    timer.Done(status);
    reactor->Finish(status);
    return reactor;
  }
  for (uint64_t id : grant->batch_ids) reply->add_batch_ids(id);
  reply->set_batches_per_epoch(grant->batches_per_epoch);
  reply->set_exhausted(grant->exhausted);
  reply->set_model_version(store_->version());
  timer.Done(grpc::Status::OK);
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

grpc::ServerReadReactor<grpc::ByteBuffer>* GrpcParameterService::Push(
    grpc::CallbackServerContext* /*context*/, grpc::ByteBuffer* reply) {
  return new PushReactor(store_, metrics_, reply);
}

}  // namespace asgd
