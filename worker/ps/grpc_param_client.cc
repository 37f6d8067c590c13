#include "worker/ps/grpc_param_client.h"

#include <algorithm>
#include <cstring>
#include <future>
#include <utility>

#include "absl/functional/function_ref.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/grpc_status.h"
#include "common/status_macros.h"
#include "common/tensor_wire.h"
#include "compression/grad_codec.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/grpcpp.h"
#include "model/model_spec_proto.h"
#include "worker/ps/delta_receiver.h"

namespace asgd {
namespace {

constexpr char kPullMethod[] = "/asgd.v1.ParameterServer/Pull";
constexpr char kPushMethod[] = "/asgd.v1.ParameterServer/Push";
constexpr char kPullStreamMethod[] = "/asgd.v1.ParameterServer/PullStream";
constexpr char kPushStreamMethod[] = "/asgd.v1.ParameterServer/PushStream";

// The most bytes one compressed chunk message should carry: well under the
// servers' 4 MiB message limit.
constexpr double kCompressedChunkBytes = 3 << 20;

void SetDeadline(grpc::ClientContext* ctx, absl::Duration timeout) {
  ctx->set_deadline(absl::ToChronoTime(absl::Now() + timeout));
}

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
  // Writes the last message and half-closes.
  bool WriteLast(const grpc::ByteBuffer& msg, absl::Time deadline) {
    if (ok_) {
      call_->WriteLast(msg, grpc::WriteOptions(), this);
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

// A long-lived PushStream or PullStream to one server, or (per_call) the
// one-shot Push or Pull call of a single operation: its context and call.
class ClientStream {
 public:
  ClientStream(grpc::GenericStub* stub, const std::string& method,
               bool wait_for_ready, absl::Time deadline, bool per_call) {
    ctx_.set_wait_for_ready(wait_for_ready);
    if (per_call) ctx_.set_deadline(absl::ToChronoTime(deadline));
    call_ = std::make_unique<RawCall>(stub, &ctx_, method, deadline);
  }
  RawCall& call() { return *call_; }

 private:
  grpc::ClientContext ctx_;
  std::unique_ptr<RawCall> call_;
};

namespace {

asgd::v1::PushChunk PushHeaderMessage(uint64_t worker_id, uint64_t version,
                                      int num_minibatches, PushKind kind) {
  asgd::v1::PushChunk msg;
  msg.set_model_version(version);
  auto* header = msg.mutable_header();
  header->set_worker_id(worker_id);
  header->set_model_version(version);
  header->set_num_minibatches(num_minibatches);
  header->set_kind(kind == PushKind::kAssign ? asgd::v1::PushHeader::ASSIGN
                                             : asgd::v1::PushHeader::GRADIENT);
  return msg;
}

absl::StatusOr<asgd::v1::PushReply> ParsePushReply(
    const grpc::ByteBuffer& buffer) {
  asgd::v1::PushReply reply;
  ASGD_RETURN_IF_ERROR(ParseFromByteBuffer(buffer, &reply, "push reply"));
  return reply;
}

asgd::v1::PushChunk PushCommitMessage(uint64_t version, uint64_t chunks) {
  asgd::v1::PushChunk msg;
  msg.set_model_version(version);
  msg.mutable_commit()->set_num_chunks(chunks);
  return msg;
}

}  // namespace

GrpcParamClient::GrpcParamClient(PoolClientOptions options, ModelLayout layout,
                                 ModelSpec model)
    : options_(std::move(options)),
      layout_(std::move(layout)),
      model_(std::move(model)) {}

GrpcParamClient::~GrpcParamClient() = default;

absl::StatusOr<std::unique_ptr<GrpcParamClient>> GrpcParamClient::Create(
    const std::vector<std::string>& addresses,
    const PoolClientOptions& options) {
  if (addresses.empty()) return absl::InvalidArgumentError("no servers given");
  const PushEncoding push_encoding = options.push_encoding.value_or(
      static_cast<PushEncoding>(options.wire_dtype));
  if (push_encoding == PushEncoding::kTopK &&
      !(options.top_k_fraction > 0 && options.top_k_fraction <= 0.25)) {
    return absl::InvalidArgumentError(
        absl::StrCat("top-k fraction must be in (0, 0.25], got ",
                     options.top_k_fraction));
  }
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
  std::vector<std::unique_ptr<Server>> servers(addresses.size());
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
        servers[d.server_index()] != nullptr) {
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
    auto lists = [](const auto& dtypes, int value) {
      return std::find(dtypes.begin(), dtypes.end(), value) != dtypes.end();
    };
    if (options.wire_dtype != WireDtype::kFloat32 &&
        !lists(d.wire_dtypes(), static_cast<int>(options.wire_dtype))) {
      return absl::FailedPreconditionError(absl::StrCat(
          "server ", addresses[i], " does not support the ",
          WireDtypeName(options.wire_dtype),
          " wire format (an older asgd_server?); use --wire_dtype=fp32"));
    }
    if (IsCompressed(push_encoding) &&
        (!lists(d.push_dtypes(), static_cast<int>(push_encoding)) ||
         d.compressed_format_version() !=
             static_cast<uint32_t>(kGradCodecVersion) ||
         d.max_compressed_chunk_elements() < 1)) {
      return absl::FailedPreconditionError(absl::StrCat(
          "server ", addresses[i], " does not accept ",
          PushEncodingName(push_encoding),
          " pushes in compressed format version ", kGradCodecVersion,
          " (it offers format version ", d.compressed_format_version(),
          "; an older asgd_server, or one started with "
          "--compressed_pushes=false?); use --push_encoding=fp32 or bf16"));
    }
    auto server = std::make_unique<Server>();
    server->address = addresses[i];
    server->stub = std::move(stub);
    server->raw_stub = std::move(raw_stub);
    servers[d.server_index()] = std::move(server);
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
  client->push_encoding_ = push_encoding;
  client->attributes_.insert(descs[0].model_attributes().begin(),
                             descs[0].model_attributes().end());
  // The server's own limit bounds both directions; 4 bytes each, it must stay
  // well under gRPC's 4 MB default message size.
  client->max_chunk_elements_ = static_cast<int64_t>(descs[0].max_chunk_elements());
  client->use_streams_ = options.streams;
  uint64_t compressed_limit = ~uint64_t{0};
  for (const auto& d : descs) {
    const int limit = static_cast<int>(
        std::min<uint32_t>(d.max_push_minibatches(), 1u << 20));
    if (limit > 0 && (client->max_push_minibatches_ == 0 ||
                      limit < client->max_push_minibatches_)) {
      client->max_push_minibatches_ = limit;
    }
    client->use_streams_ = client->use_streams_ && d.streams();
    compressed_limit =
        std::min<uint64_t>(compressed_limit, d.max_compressed_chunk_elements());
  }
  if (client->max_chunk_elements_ < 1 ||
      client->max_chunk_elements_ > (int64_t{3} << 20) / 4) {
    return absl::FailedPreconditionError(absl::StrCat(
        "server chunk limit ", descs[0].max_chunk_elements(),
        " elements is outside [1, 786432]"));
  }
  // Compressed chunks: as many elements as the servers take, within about
  // 3 MiB of encoded bytes at the encoding's worst case (one-bit: 1/8 byte
  // per element plus 8 bytes per group; top-k: 8 bytes per element sent).
  int64_t compressed_elements = 0;
  GradEncoderOptions encoder_options;
  encoder_options.encoding = push_encoding == PushEncoding::kTopK
                                 ? GradEncoding::kTopK
                                 : GradEncoding::kOneBit;
  encoder_options.top_k_fraction = options.top_k_fraction;
  if (IsCompressed(push_encoding)) {
    int64_t min_group = encoder_options.max_group_size;
    for (const TensorSpec& t : client->layout_.tensors()) {
      min_group = std::min<int64_t>(min_group, t.shape.empty() ? 1 : t.shape.back());
    }
    const double bytes_per_element =
        push_encoding == PushEncoding::kTopK
            ? 8.0 * options.top_k_fraction
            : 0.125 + 8.0 / static_cast<double>(std::max<int64_t>(min_group, 1));
    compressed_elements = static_cast<int64_t>(std::min<double>(
        static_cast<double>(std::min<uint64_t>(compressed_limit,
                                               kGradCodecMaxElements)),
        kCompressedChunkBytes / bytes_per_element));
    compressed_elements = std::max<int64_t>(compressed_elements, 1);
  }
  // Delta pulls: float32 pulls on streams, from servers that offer them.
  client->use_delta_ = options.delta_pulls && client->use_streams_ &&
                       options.wire_dtype == WireDtype::kFloat32;
  for (size_t s = 0; s < servers.size(); ++s) {
    Server& server = *servers[s];
    const FlatRange range = client->layout_.ServerRange(s);
    server.delta = client->use_delta_ && descs[s].delta_pulls();
    server.max_compressed_elements = static_cast<int64_t>(std::min<uint64_t>(
        descs[s].max_compressed_chunk_elements(), kGradCodecMaxElements));
    server.float_plan =
        PlanChunks(client->layout_, range, client->max_chunk_elements_);
    if (IsCompressed(push_encoding)) {
      server.compressed_plan =
          PlanChunks(client->layout_, range, compressed_elements);
      absl::StatusOr<GradEncoder> encoder =
          GradEncoder::Create(client->layout_, range, encoder_options);
      if (!encoder.ok()) return encoder.status();
      absl::MutexLock lock(&server.push_mu);
      server.encoder.emplace(*std::move(encoder));
    }
  }
  client->servers_ = std::move(servers);
  return client;
}

int64_t GrpcParamClient::streams_opened() const { return streams_opened_.load(); }

std::vector<float> GrpcParamClient::Residual(int server) const {
  const Server& s = *servers_[server];
  absl::MutexLock lock(&s.push_mu);
  if (!s.encoder.has_value()) return {};
  return std::vector<float>(s.encoder->residual().begin(),
                            s.encoder->residual().end());
}

absl::StatusOr<uint64_t> GrpcParamClient::PullFrom(int server_index,
                                                   absl::Span<float> params) {
  Server& server = *servers_[server_index];
  const FlatRange range = layout_.ServerRange(server_index);
  const absl::Time deadline = absl::Now() + options_.rpc_timeout;
  absl::MutexLock lock(&server.pull_mu);
  asgd::v1::PullRequest request;
  request.set_worker_id(options_.worker_id);
  request.set_dtype(static_cast<asgd::v1::WireDtype>(options_.wire_dtype));
  // A delta pull: the copy is lost until a reply makes it exact again.
  const std::optional<uint64_t> held = server.copy_version;
  if (server.delta) {
    request.set_delta(true);
    if (held.has_value()) {
      request.set_has_copy(true);
      request.set_model_version(*held);
      request.set_lineage(server.copy_lineage);
    }
    server.copy.resize(range.size());
    server.copy_version.reset();
  }
  const grpc::ByteBuffer request_buffer = SerializeToByteBuffer(request);
  // At most two tries: a second one only when the first found the stream
  // closed as idle by the server (nothing was asked of it).
  for (int attempt = 0;; ++attempt) {
    const bool fresh = !use_streams_ || server.pull_stream == nullptr;
    std::unique_ptr<ClientStream> per_call;
    ClientStream* stream;
    if (!use_streams_) {
      // A server that is away (restarting) is waited for, within the
      // deadline: the pull goes out as soon as the channel reconnects.
      per_call = std::make_unique<ClientStream>(
          server.raw_stub.get(), kPullMethod, /*wait_for_ready=*/true,
          deadline, /*per_call=*/true);
      stream = per_call.get();
    } else {
      if (server.pull_stream == nullptr) {
        server.pull_stream = std::make_unique<ClientStream>(
            server.raw_stub.get(), kPullStreamMethod, /*wait_for_ready=*/true,
            deadline, /*per_call=*/false);
        streams_opened_.fetch_add(1);
      }
      stream = server.pull_stream.get();
    }
    RawCall& call = stream->call();
    ChunkAssembler assembler(&layout_, range, max_chunk_elements_,
                             params.data() + range.begin,
                             /*check_finite=*/true);
    std::optional<DeltaReceiver> receiver;
    if (server.delta) {
      receiver.emplace(&layout_, range, max_chunk_elements_,
                       server.max_compressed_elements, server.copy.data(),
                       held);
    }
    bool exact = false;  // the reply leaves the copy exact
    uint64_t lineage = 0;
    uint64_t version = 0;
    bool first = true;
    bool ended = false;  // the end-of-pull message (streams) arrived
    absl::Status bad;
    const bool sent = use_streams_ ? call.Write(request_buffer, deadline)
                                   : call.WriteLast(request_buffer, deadline);
    grpc::ByteBuffer buffer;
    ReceivedMessage received;
    PullMessage msg;
    while (sent && bad.ok() && !ended && call.Read(&buffer, deadline)) {
      bad = DecodePullChunk(buffer, &received, &msg);
      if (!bad.ok()) break;
      if (first) {
        version = msg.model_version;
        exact = msg.exact;
      }
      first = false;
      if (msg.model_version != version) {
        bad = absl::DataLossError("pull chunks carry different versions");
      } else if (msg.exact != exact || (exact && !receiver.has_value())) {
        bad = absl::DataLossError(
            "a pull reply mixes exact and plain messages, or is exact "
            "without being asked");
      } else if (exact && msg.end_of_pull) {
        ended = true;
        lineage = msg.lineage;
        bad = receiver->Finish(version, msg.num_chunks);
      } else if (exact) {
        bad = receiver->Add(msg);
      } else if (msg.end_of_pull && use_streams_) {
        ended = true;
        if (msg.num_chunks !=
            static_cast<uint64_t>(assembler.chunks_received())) {
          bad = absl::DataLossError(absl::StrCat(
              "pull ended after ", assembler.chunks_received(),
              " chunks but the server says it sent ", msg.num_chunks));
        }
      } else if (!msg.has_chunk) {
        bad = absl::DataLossError("pull message without a chunk");
      } else {
        bad = assembler.Add(msg.chunk);
      }
    }
    if (use_streams_ && bad.ok() && ended && exact) {
      server.copy_version = version;
      server.copy_lineage = lineage;
      std::memcpy(params.data() + range.begin, server.copy.data(),
                  range.size() * sizeof(float));
      (receiver->received_weights() ? exact_weight_pulls_ : update_pulls_)
          .fetch_add(1, std::memory_order_relaxed);
      update_bytes_.fetch_add(receiver->update_bytes(),
                              std::memory_order_relaxed);
      return version;
    }
    if (use_streams_ && bad.ok() && ended) {
      ASGD_RETURN_IF_ERROR(assembler.Finish(assembler.chunks_received()));
      return version;
    }
    // The call is over (or must be): its status says why.
    if (!bad.ok()) call.Cancel();
    const grpc::Status status = call.Finish(deadline);
    const absl::Status final_status =
        FromGrpcStatus(status, call.context());
    if (use_streams_) server.pull_stream.reset();
    if (!bad.ok() && assembler.error() == ChunkError::kNonFinite) {
      return absl::FailedPreconditionError(absl::StrCat(
          "the model on this server contains NaN or Inf (", bad.message(),
          "): training diverged; restart with a lower --learning_rate"));
    }
    if (!bad.ok()) return bad;
    if (use_streams_) {
      if (final_status.ok() && first && !fresh && attempt == 0) {
        continue;  // closed as idle before our request: ask a new stream
      }
      if (final_status.ok()) {
        return absl::UnavailableError(
            "the pull stream ended before the pull was complete");
      }
      return final_status;
    }
    ASGD_RETURN_IF_ERROR(final_status);
    ASGD_RETURN_IF_ERROR(assembler.Finish(assembler.chunks_received()));
    return version;
  }
}

absl::Status GrpcParamClient::Pull(absl::Span<float> params,
                                   std::vector<uint64_t>* versions) {
  if (static_cast<int64_t>(params.size()) != layout_.total_size()) {
    return absl::InvalidArgumentError("pull buffer has the wrong size");
  }
  const int n = static_cast<int>(servers_.size());
  std::vector<std::future<absl::StatusOr<uint64_t>>> futures;
  for (int s = 1; s < n; ++s) {
    futures.push_back(std::async(std::launch::async,
                                 [this, s, params] { return PullFrom(s, params); }));
  }
  absl::StatusOr<uint64_t> first = PullFrom(0, params);
  versions->assign(n, 0);
  absl::Status status = WithServer(servers_[0]->address, first.status());
  if (first.ok()) (*versions)[0] = *first;
  for (int s = 1; s < n; ++s) {
    absl::StatusOr<uint64_t> v = futures[s - 1].get();
    if (v.ok()) {
      (*versions)[s] = *v;
    } else if (status.ok()) {
      status = WithServer(servers_[s]->address, v.status());
    }
  }
  return status;
}

absl::StatusOr<asgd::v1::PushReply> GrpcParamClient::PushTo(
    int server_index, absl::Span<const float> gradient, uint64_t version,
    int num_minibatches, PushKind kind) {
  Server& server = *servers_[server_index];
  const bool compressed =
      kind == PushKind::kGradient && IsCompressed(push_encoding_);
  const WireDtype float_dtype =
      kind == PushKind::kGradient && !compressed
          ? static_cast<WireDtype>(push_encoding_)
          : options_.wire_dtype;
  const std::vector<ChunkRef>& plan =
      compressed ? server.compressed_plan : server.float_plan;
  const grpc::ByteBuffer header = SerializeToByteBuffer(
      PushHeaderMessage(options_.worker_id, version, num_minibatches, kind));
  const grpc::ByteBuffer commit =
      SerializeToByteBuffer(PushCommitMessage(version, plan.size()));
  const absl::Time deadline = absl::Now() + options_.rpc_timeout;

  absl::MutexLock lock(&server.push_mu);
  // The compressed chunks, encoded once (the residual moves on) and kept
  // until the push's fate is known.
  std::vector<std::string> encoded(compressed ? plan.size() : 0);
  size_t num_encoded = 0;
  absl::Status encode_error;
  // Builds message i of the plan.
  auto chunk_message = [&](size_t i) -> std::optional<grpc::ByteBuffer> {
    const ChunkRef& c = plan[i];
    const std::string& name = layout_.tensors()[c.tensor].name;
    if (!compressed) {
      push_bytes_.fetch_add(c.count * WireBytes(float_dtype),
                            std::memory_order_relaxed);
      // Encoded straight into the outgoing slice: one pass over the values.
      return EncodeChunkMessage(
          ChunkMessageKind::kPush, version, name, c.offset, float_dtype,
          c.count, [&](char* out) {
            EncodeFloats(gradient.data() + c.flat_begin, c.count, float_dtype,
                         out);
          });
    }
    if (i >= num_encoded) {
      encode_error = server.encoder->EncodeChunk(
          c, gradient.data() + c.flat_begin, &encoded[i]);
      if (!encode_error.ok()) return std::nullopt;
      num_encoded = i + 1;
    }
    push_bytes_.fetch_add(static_cast<int64_t>(encoded[i].size()),
                          std::memory_order_relaxed);
    return EncodeCompressedChunkMessage(version, name, c.offset,
                                        push_encoding_, encoded[i]);
  };
  // Hands every chunk encoded so far back to the residual; with `whole`,
  // first encodes the chunks not reached yet (a push refused early), so that
  // all of the gradient goes back, not only what was sent. A chunk that
  // cannot be encoded (NaN/Inf) is left out, as a push would have.
  auto restore = [&](bool whole) {
    for (size_t i = num_encoded; whole && i < plan.size(); ++i) {
      std::string bytes;
      if (server.encoder
              ->EncodeChunk(plan[i], gradient.data() + plan[i].flat_begin,
                            &bytes)
              .ok()) {
        const absl::Status s = server.encoder->Restore(plan[i], bytes);
        (void)s;
      }
    }
    for (size_t i = 0; i < num_encoded; ++i) {
      // Cannot fail: the bytes are what EncodeChunk wrote for that chunk.
      const absl::Status s = server.encoder->Restore(plan[i], encoded[i]);
      (void)s;
    }
    num_encoded = 0;
  };

  absl::StatusOr<asgd::v1::PushReply> result;
  for (int attempt = 0;; ++attempt) {
    const bool fresh = !use_streams_ || server.push_stream == nullptr;
    std::unique_ptr<ClientStream> per_call;
    ClientStream* stream;
    if (!use_streams_) {
      per_call = std::make_unique<ClientStream>(
          server.raw_stub.get(), kPushMethod, /*wait_for_ready=*/false,
          deadline, /*per_call=*/true);
      stream = per_call.get();
    } else {
      if (server.push_stream == nullptr) {
        server.push_stream = std::make_unique<ClientStream>(
            server.raw_stub.get(), kPushStreamMethod, /*wait_for_ready=*/false,
            deadline, /*per_call=*/false);
        streams_opened_.fetch_add(1);
      }
      stream = server.push_stream.get();
    }
    RawCall& call = stream->call();
    bool ok = call.Write(header, deadline);
    for (size_t i = 0; ok && i < plan.size(); ++i) {
      std::optional<grpc::ByteBuffer> msg = chunk_message(i);
      if (!msg.has_value()) {
        call.Cancel();
        ok = false;
        break;
      }
      ok = call.Write(*msg, deadline);
    }
    if (ok) {
      ok = use_streams_ ? call.Write(commit, deadline)
                        : call.WriteLast(commit, deadline);
    }
    grpc::ByteBuffer reply_buffer;
    const bool got_reply = encode_error.ok() && call.Read(&reply_buffer, deadline);
    if (!encode_error.ok()) {
      if (use_streams_) server.push_stream.reset();
      restore(/*whole=*/false);
      return encode_error;
    }
    if (use_streams_ && got_reply) {
      result = ParsePushReply(reply_buffer);
      if (!result.ok()) server.push_stream.reset();
      break;
    }
    const grpc::Status status = call.Finish(deadline);
    absl::Status final_status = FromGrpcStatus(status, call.context());
    if (use_streams_) {
      server.push_stream.reset();
      if (final_status.ok() && !fresh && attempt == 0) {
        continue;  // closed as idle before our push: send it on a new stream
      }
      result = final_status.ok()
                   ? absl::UnavailableError(
                         "the push stream ended before the push was answered")
                   : final_status;
      break;
    }
    if (!final_status.ok()) {
      result = final_status;
    } else if (!got_reply) {
      result = absl::DataLossError("push answered OK without a reply");
    } else {
      result = ParsePushReply(reply_buffer);
    }
    break;
  }
  // A compressed push that was not applied goes back into the residual, so
  // that the next push carries it.
  if (compressed &&
      (!result.ok() || result->result() != asgd::v1::PushReply::APPLIED)) {
    restore(/*whole=*/true);
  }
  return result;
}

absl::StatusOr<PushOutcome> GrpcParamClient::Push(
    absl::Span<const float> gradient, const std::vector<uint64_t>& versions,
    int num_minibatches, PushKind kind) {
  const int n = static_cast<int>(servers_.size());
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
    if (!replies[s].ok()) {
      return WithServer(servers_[s]->address, replies[s].status());
    }
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
  for (const auto& server : servers_) {
    grpc::ClientContext ctx;
    SetDeadline(&ctx, options_.rpc_timeout);
    asgd::v1::ModelDescription d;
    grpc::Status status = server->stub->DescribeModel(&ctx, {}, &d);
    ASGD_RETURN_IF_ERROR(WithServer(server->address, FromGrpcStatus(status)));
    versions.push_back(d.model_version());
  }
  return versions;
}

absl::StatusOr<PoolGrant> GrpcParamClient::FetchBatches(
    const std::string& run_id, uint64_t num_frames, int batch_size,
    double epochs, int count) {
  grpc::ClientContext ctx;
  SetDeadline(&ctx, options_.rpc_timeout);
  asgd::v1::FetchBatchesRequest request;
  request.set_worker_id(options_.worker_id);
  request.set_run_id(run_id);
  request.set_num_frames(num_frames);
  request.set_batch_size(batch_size);
  request.set_epochs(epochs);
  request.set_count(count);
  asgd::v1::FetchBatchesReply reply;
  grpc::Status status = servers_[0]->stub->FetchBatches(&ctx, request, &reply);
  ASGD_RETURN_IF_ERROR(WithServer(servers_[0]->address, FromGrpcStatus(status)));
  PoolGrant grant;
  grant.batch_ids.assign(reply.batch_ids().begin(), reply.batch_ids().end());
  grant.batches_per_epoch = reply.batches_per_epoch();
  grant.exhausted = reply.exhausted();
  return grant;
}

}  // namespace asgd
