#include "worker/ps/grpc_param_client.h"

#include <algorithm>
#include <future>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "common/chunking.h"
#include "common/grpc_status.h"
#include "common/status_macros.h"
#include "common/tensor_wire.h"
#include "model/model_spec_proto.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/grpcpp.h"

namespace asgd {
namespace {

void SetDeadline(grpc::ClientContext* ctx, absl::Duration timeout) {
  ctx->set_deadline(absl::ToChronoTime(absl::Now() + timeout));
}

// One call of a raw (ByteBuffer) method, driven synchronously on the calling
// thread through a private completion queue: one operation at a time.
class RawCall {
 public:
  RawCall(grpc::GenericStub* stub, grpc::ClientContext* ctx,
          const std::string& method)
      : ctx_(ctx), call_(stub->PrepareCall(ctx, method, &cq_)) {
    call_->StartCall(this);
    ok_ = Wait();
  }

  ~RawCall() {
    if (!finished_) {
      ctx_->TryCancel();
      Finish();
    }
    cq_.Shutdown();
    void* tag;
    bool ok;
    while (cq_.Next(&tag, &ok)) {
    }
  }

  // False once the stream is broken; Finish() then says why.
  bool Write(const grpc::ByteBuffer& msg) {
    if (ok_) {
      call_->Write(msg, this);
      ok_ = Wait();
    }
    return ok_;
  }
  // Writes the last message and half-closes.
  bool WriteLast(const grpc::ByteBuffer& msg) {
    if (ok_) {
      call_->WriteLast(msg, grpc::WriteOptions(), this);
      ok_ = Wait();
    }
    return ok_;
  }
  // False at the end of the stream (or when it broke).
  bool Read(grpc::ByteBuffer* msg) {
    if (!ok_) return false;
    call_->Read(msg, this);
    return Wait();
  }
  grpc::Status Finish() {
    grpc::Status status;
    call_->Finish(&status, this);
    Wait();
    finished_ = true;
    return status;
  }

 private:
  bool Wait() {
    void* tag;
    bool ok = false;
    if (!cq_.Next(&tag, &ok)) return false;
    return ok;
  }

  grpc::ClientContext* const ctx_;
  grpc::CompletionQueue cq_;
  std::unique_ptr<grpc::GenericClientAsyncReaderWriter> call_;
  bool ok_ = false;
  bool finished_ = false;
};

constexpr char kPullMethod[] = "/asgd.v1.ParameterServer/Pull";
constexpr char kPushMethod[] = "/asgd.v1.ParameterServer/Push";

// `s` with the server's address in front of its message; its payloads (a
// refusal) are kept.
absl::Status WithServer(const std::string& address, absl::Status s) {
  if (s.ok()) return s;
  absl::Status out(s.code(),
                   absl::StrCat("server ", address, ": ", s.message()));
  s.ForEachPayload([&](absl::string_view url, const absl::Cord& payload) {
    out.SetPayload(url, payload);
  });
  return out;
}

}  // namespace

absl::StatusOr<std::unique_ptr<GrpcParamClient>> GrpcParamClient::Create(
    const std::vector<std::string>& addresses,
    const PoolClientOptions& options) {
  if (addresses.empty()) return absl::InvalidArgumentError("no servers given");
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(16 << 20);
  // A server that went away is tried again every 0.1 s at first, then at
  // most every 0.5 s (gRPC's default grows to 120 s): a restarted server is
  // used again well within a second of accepting connections.
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 500);
  // A connection of its own, even when several clients share a process
  // (benchmarks, tests): gRPC would otherwise multiplex them onto one.
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  std::vector<asgd::v1::ModelDescription> descs(addresses.size());
  std::vector<std::unique_ptr<asgd::v1::ParameterServer::Stub>> stubs(
      addresses.size());
  std::vector<std::unique_ptr<grpc::GenericStub>> raw_stubs(addresses.size());
  for (size_t i = 0; i < addresses.size(); ++i) {
    ASGD_ASSIGN_OR_RETURN(std::shared_ptr<grpc::Channel> channel,
                          MakeChannel(addresses[i], options.security, args));
    auto stub = asgd::v1::ParameterServer::NewStub(channel);
    auto raw_stub = std::make_unique<grpc::GenericStub>(channel);
    grpc::ClientContext ctx;
    ctx.set_wait_for_ready(true);  // servers may still be starting
    SetDeadline(&ctx, options.connect_timeout);
    grpc::Status s = stub->DescribeModel(&ctx, {}, &descs[i]);
    if (!s.ok()) {
      return WithServer(addresses[i],
                        absl::Status(FromGrpcStatus(s).code(),
                                     absl::StrCat("DescribeModel failed: ",
                                                  s.error_message())));
    }
    const auto& d = descs[i];
    if (d.num_servers() != addresses.size()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "server ", addresses[i], " belongs to a pool of ", d.num_servers(),
          " servers but ", addresses.size(), " addresses were given"));
    }
    if (d.server_index() >= addresses.size() ||
        stubs[d.server_index()] != nullptr) {
      return absl::FailedPreconditionError(absl::StrCat(
          "server ", addresses[i], " says it is index ", d.server_index(),
          ", which is out of range or taken by another address"));
    }
    if (d.model().SerializeAsString() != descs[0].model().SerializeAsString()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "servers ", addresses[0], " and ", addresses[i],
          " hold different models: start every server with the same model "
          "flags"));
    }
    if (d.layout_fingerprint() != descs[0].layout_fingerprint()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "servers ", addresses[0], " and ", addresses[i],
          " hold different models (layout fingerprints ",
          descs[0].layout_fingerprint(), " vs ", d.layout_fingerprint(),
          "): start every server with the same model flags"));
    }
    if (options.wire_dtype != WireDtype::kFloat32 &&
        std::find(d.wire_dtypes().begin(), d.wire_dtypes().end(),
                  static_cast<int>(options.wire_dtype)) ==
            d.wire_dtypes().end()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "server ", addresses[i], " does not support the ",
          WireDtypeName(options.wire_dtype),
          " wire format (an older asgd_server?); use --wire_dtype=fp32"));
    }
    stubs[d.server_index()] = std::move(stub);
    raw_stubs[d.server_index()] = std::move(raw_stub);
  }
  std::vector<TensorSpec> tensors;
  for (const auto& t : descs[0].tensors()) {
    TensorSpec spec{t.name(), {}};
    for (uint64_t dim : t.shape()) spec.shape.push_back(dim);
    tensors.push_back(std::move(spec));
  }
  absl::StatusOr<ModelSpec> model = ModelSpecFromProto(descs[0].model());
  if (!model.ok()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the pool serves a model this worker cannot use (an older or newer "
        "asgd_server?): ", model.status().message()));
  }
  // The layout of the model the pool describes; its fingerprint (which
  // covers the spec) must be the pool's.
  ASGD_ASSIGN_OR_RETURN(
      ModelLayout layout,
      ModelLayout::Create(ModelTensors(*model), descs[0].num_servers(),
                          descs[0].num_shards(), ModelSpecDigest(*model)));
  bool same = tensors.size() == layout.tensors().size();
  for (size_t t = 0; same && t < tensors.size(); ++t) {
    same = tensors[t].name == layout.tensors()[t].name &&
           tensors[t].shape == layout.tensors()[t].shape;
  }
  if (!same || layout.Fingerprint() != descs[0].layout_fingerprint()) {
    return absl::FailedPreconditionError(
        "the pool's tensors or layout fingerprint do not match the model it "
        "describes (incompatible asgd versions?)");
  }
  auto client = std::unique_ptr<GrpcParamClient>(
      new GrpcParamClient(options, std::move(layout), *std::move(model)));
  client->attributes_.insert(descs[0].model_attributes().begin(),
                             descs[0].model_attributes().end());
  // The server's own limit bounds both directions; 4 bytes each, it must stay
  // well under gRPC's 4 MB default message size.
  client->max_chunk_elements_ = static_cast<int64_t>(descs[0].max_chunk_elements());
  for (const auto& d : descs) {
    const int limit = static_cast<int>(
        std::min<uint32_t>(d.max_push_minibatches(), 1u << 20));
    if (limit > 0 && (client->max_push_minibatches_ == 0 ||
                      limit < client->max_push_minibatches_)) {
      client->max_push_minibatches_ = limit;
    }
  }
  if (client->max_chunk_elements_ < 1 ||
      client->max_chunk_elements_ > (int64_t{3} << 20) / 4) {
    return absl::FailedPreconditionError(absl::StrCat(
        "server chunk limit ", descs[0].max_chunk_elements(),
        " elements is outside [1, 786432]"));
  }
  client->addresses_.resize(addresses.size());
  for (const auto& d : descs) {
    client->addresses_[d.server_index()] =
        addresses[&d - descs.data()];
  }
  client->stubs_ = std::move(stubs);
  client->raw_stubs_ = std::move(raw_stubs);
  return client;
}

absl::StatusOr<uint64_t> GrpcParamClient::PullFrom(int server,
                                                   absl::Span<float> params) {
  const FlatRange range = layout_.ServerRange(server);
  grpc::ClientContext ctx;
  SetDeadline(&ctx, options_.rpc_timeout);
  // A server that is away (restarting) is waited for, within the deadline:
  // the pull goes out as soon as the channel reconnects.
  ctx.set_wait_for_ready(true);
  asgd::v1::PullRequest request;
  request.set_worker_id(options_.worker_id);
  request.set_dtype(static_cast<asgd::v1::WireDtype>(options_.wire_dtype));
  ChunkAssembler assembler(&layout_, range, max_chunk_elements_,
                           params.data() + range.begin, /*check_finite=*/true);
  uint64_t version = 0;
  bool first = true;
  absl::Status bad;
  grpc::Status status;
  {
    RawCall call(raw_stubs_[server].get(), &ctx, kPullMethod);
    call.WriteLast(SerializeToByteBuffer(request));
    grpc::ByteBuffer buffer;
    ReceivedMessage received;
    PullMessage msg;
    while (bad.ok() && call.Read(&buffer)) {
      bad = DecodePullChunk(buffer, &received, &msg);
      if (!bad.ok()) break;
      if (first) version = msg.model_version;
      first = false;
      if (msg.model_version != version) {
        bad = absl::DataLossError("pull chunks carry different versions");
      } else if (!msg.has_chunk) {
        bad = absl::DataLossError("pull message without a chunk");
      } else {
        bad = assembler.Add(msg.chunk);
      }
    }
    if (!bad.ok()) ctx.TryCancel();
    status = call.Finish();
  }
  if (!bad.ok() && assembler.error() == ChunkError::kNonFinite) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the model on this server contains NaN or Inf (", bad.message(),
        "): training diverged; restart with a lower --learning_rate"));
  }
  if (!bad.ok()) return bad;
  ASGD_RETURN_IF_ERROR(FromGrpcStatus(status, ctx));
  ASGD_RETURN_IF_ERROR(assembler.Finish(assembler.chunks_received()));
  return version;
}

absl::Status GrpcParamClient::Pull(absl::Span<float> params,
                                   std::vector<uint64_t>* versions) {
  if (static_cast<int64_t>(params.size()) != layout_.total_size()) {
    return absl::InvalidArgumentError("pull buffer has the wrong size");
  }
  const int n = static_cast<int>(stubs_.size());
  std::vector<std::future<absl::StatusOr<uint64_t>>> futures;
  for (int s = 1; s < n; ++s) {
    futures.push_back(std::async(std::launch::async,
                                 [this, s, params] { return PullFrom(s, params); }));
  }
  absl::StatusOr<uint64_t> first = PullFrom(0, params);
  versions->assign(n, 0);
  absl::Status status = WithServer(addresses_[0], first.status());
  if (first.ok()) (*versions)[0] = *first;
  for (int s = 1; s < n; ++s) {
    absl::StatusOr<uint64_t> v = futures[s - 1].get();
    if (v.ok()) {
      (*versions)[s] = *v;
    } else if (status.ok()) {
      status = WithServer(addresses_[s], v.status());
    }
  }
  return status;
}

absl::StatusOr<asgd::v1::PushReply> GrpcParamClient::PushTo(
    int server, absl::Span<const float> gradient, uint64_t version,
    int num_minibatches, PushKind kind) {
  grpc::ClientContext ctx;
  SetDeadline(&ctx, options_.rpc_timeout);
  grpc::Status status;
  grpc::ByteBuffer reply_buffer;
  bool got_reply = false;
  {
    RawCall call(raw_stubs_[server].get(), &ctx, kPushMethod);
    asgd::v1::PushChunk msg;
    msg.set_model_version(version);
    auto* header = msg.mutable_header();
    header->set_worker_id(options_.worker_id);
    header->set_model_version(version);
    header->set_num_minibatches(num_minibatches);
    header->set_kind(kind == PushKind::kAssign ? asgd::v1::PushHeader::ASSIGN
                                               : asgd::v1::PushHeader::GRADIENT);
    bool ok = call.Write(SerializeToByteBuffer(msg));
    const auto plan =
        PlanChunks(layout_, layout_.ServerRange(server), max_chunk_elements_);
    for (size_t i = 0; ok && i < plan.size(); ++i) {
      const ChunkRef& c = plan[i];
      // Encoded straight into the outgoing slice: one pass over the values.
      ok = call.Write(EncodeChunkMessage(
          ChunkMessageKind::kPush, version, layout_.tensors()[c.tensor].name,
          c.offset, options_.wire_dtype, c.count, [&](char* out) {
            EncodeFloats(gradient.data() + c.flat_begin, c.count,
                         options_.wire_dtype, out);
          }));
    }
    if (ok) {
      msg.Clear();
      msg.set_model_version(version);
      msg.mutable_commit()->set_num_chunks(plan.size());
      ok = call.WriteLast(SerializeToByteBuffer(msg));
    }
    got_reply = call.Read(&reply_buffer);
    status = call.Finish();
  }
  ASGD_RETURN_IF_ERROR(FromGrpcStatus(status, ctx));
  asgd::v1::PushReply reply;
  if (!got_reply) {
    return absl::DataLossError("push answered OK without a reply");
  }
  ASGD_RETURN_IF_ERROR(ParseFromByteBuffer(reply_buffer, &reply, "push reply"));
  return reply;
}

absl::StatusOr<PushOutcome> GrpcParamClient::Push(
    absl::Span<const float> gradient, const std::vector<uint64_t>& versions,
    int num_minibatches, PushKind kind) {
  const int n = static_cast<int>(stubs_.size());
  if (static_cast<int64_t>(gradient.size()) != layout_.total_size() ||
      static_cast<int>(versions.size()) != n) {
    return absl::InvalidArgumentError("push gradient or versions wrong size");
  }
  std::vector<std::future<absl::StatusOr<asgd::v1::PushReply>>> futures;
  for (int s = 1; s < n; ++s) {
    futures.push_back(std::async(std::launch::async, [=] {
      return PushTo(s, gradient, versions[s], num_minibatches, kind);
    }));
  }
  std::vector<absl::StatusOr<asgd::v1::PushReply>> replies;
  replies.push_back(PushTo(0, gradient, versions[0], num_minibatches, kind));
  for (auto& f : futures) replies.push_back(f.get());
  PushOutcome outcome;
  for (int s = 0; s < n; ++s) {
    if (!replies[s].ok()) return WithServer(addresses_[s], replies[s].status());
    const auto& r = *replies[s];
    if (r.result() == asgd::v1::PushReply::APPLIED) {
      ++outcome.applied;
    } else {
      ++outcome.dropped;
    }
    outcome.pull_required |= r.pull_required();
    outcome.max_staleness = std::max<uint64_t>(outcome.max_staleness,
                                               r.staleness());
  }
  return outcome;
}

absl::StatusOr<std::vector<uint64_t>> GrpcParamClient::Versions() {
  std::vector<uint64_t> versions;
  for (size_t s = 0; s < stubs_.size(); ++s) {
    grpc::ClientContext ctx;
    SetDeadline(&ctx, options_.rpc_timeout);
    asgd::v1::ModelDescription d;
    grpc::Status status = stubs_[s]->DescribeModel(&ctx, {}, &d);
    ASGD_RETURN_IF_ERROR(WithServer(addresses_[s], FromGrpcStatus(status)));
    versions.push_back(d.model_version());
  }
  return versions;
}

absl::StatusOr<PoolGrant> GrpcParamClient::FetchBatches(uint64_t num_frames,
                                                        int batch_size,
                                                        double epochs,
                                                        int count) {
  grpc::ClientContext ctx;
  SetDeadline(&ctx, options_.rpc_timeout);
  asgd::v1::FetchBatchesRequest request;
  request.set_worker_id(options_.worker_id);
  request.set_num_frames(num_frames);
  request.set_batch_size(batch_size);
  request.set_epochs(epochs);
  request.set_count(count);
  asgd::v1::FetchBatchesReply reply;
  grpc::Status status = stubs_[0]->FetchBatches(&ctx, request, &reply);
  ASGD_RETURN_IF_ERROR(WithServer(addresses_[0], FromGrpcStatus(status)));
  PoolGrant grant;
  grant.batch_ids.assign(reply.batch_ids().begin(), reply.batch_ids().end());
  grant.batches_per_epoch = reply.batches_per_epoch();
  grant.exhausted = reply.exhausted();
  return grant;
}

}  // namespace asgd
