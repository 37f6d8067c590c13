#include "server/grpc_service.h"

#include <memory>
#include <string>

#include "common/protocol.h"
#include "common/tensor_wire.h"
#include "compression/grad_codec.h"
#include "proto/asgd.pb.h"
#include "server/grpc_pull_stream_reactor.h"
#include "server/grpc_push_stream_reactor.h"
#include "server/grpc_unary_reactor.h"

namespace asgd {

GrpcParameterService::GrpcParameterService(ParamStore* store, BatchPool* pool,
                                           ServerMetrics* metrics,
                                           const GrpcServiceOptions& options)
    : store_(store),
      pool_(pool),
      metrics_(metrics),
      options_(options),
      watchdog_(options.push_progress_timeout, options.clock,
                /*start_thread=*/options.clock == nullptr),
      idle_watchdog_(options.stream_idle_timeout, options.clock,
                     /*start_thread=*/options.clock == nullptr),
      admission_(CallLimits{options.max_pushes_per_peer, options.max_calls,
                            options.max_calls_per_peer}) {
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
    description_.set_max_compressed_chunk_elements(
        static_cast<uint64_t>(store->options().max_compressed_chunk_elements));
  }
  description_.set_streams(true);
  description_.set_protocol_version(kProtocolVersion);
  description_.set_admm_slots(store->admm_slots());
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

void GrpcParameterService::BeginShutdown() {
  shutting_down_.store(true, std::memory_order_release);
  idle_watchdog_.ExpireAll();
}

grpc::ServerUnaryReactor* GrpcParameterService::DescribeModel(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* request,
    grpc::ByteBuffer* reply) {
  auto* reactor =
      new UnaryReactor(this, metrics_, RpcMethod::kDescribeModel, context);
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

grpc::ServerUnaryReactor* GrpcParameterService::FetchBatches(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* request,
    grpc::ByteBuffer* reply) {
  auto* reactor =
      new UnaryReactor(this, metrics_, RpcMethod::kFetchBatches, context);
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

grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>*
GrpcParameterService::PushStream(grpc::CallbackServerContext* context) {
  return NewPushStreamReactor(this, store_, metrics_, context);
}

grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>*
GrpcParameterService::PullStream(grpc::CallbackServerContext* context) {
  return NewPullStreamReactor(this, store_, metrics_, context);
}

}  // namespace asgd
