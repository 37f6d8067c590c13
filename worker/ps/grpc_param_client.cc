#include "worker/ps/grpc_param_client.h"

#include <algorithm>
#include <cstring>
#include <future>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/grpc_status.h"
#include "common/status_macros.h"
#include "common/tensor_wire.h"
#include "compression/grad_codec.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/grpcpp.h"
#include "worker/ps/grpc_client_stream.h"
#include "worker/ps/pool_description.h"

namespace asgd {
namespace {

constexpr char kPullStreamMethod[] = "/asgd.v1.ParameterServer/PullStream";
constexpr char kPushStreamMethod[] = "/asgd.v1.ParameterServer/PushStream";

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

namespace {

asgd::v1::PushChunk PushHeaderMessage(uint64_t worker_id, uint64_t version,
                                      int num_minibatches, PushKind kind,
                                      int admm_slot) {
  asgd::v1::PushChunk msg;
  msg.set_model_version(version);
  auto* header = msg.mutable_header();
  header->set_worker_id(worker_id);
  header->set_model_version(version);
  header->set_num_minibatches(num_minibatches);
  header->set_kind(kind == PushKind::kAssign ? asgd::v1::PushHeader::ASSIGN
                   : kind == PushKind::kAdd  ? asgd::v1::PushHeader::ADD
                   : kind == PushKind::kAdmm ? asgd::v1::PushHeader::ADMM
                                             : asgd::v1::PushHeader::GRADIENT);
  if (kind == PushKind::kAdmm) header->set_admm_slot(admm_slot);
  return msg;
}

absl::StatusOr<ServerPushReply> ParsePushReply(const grpc::ByteBuffer& buffer) {
  asgd::v1::PushReply reply;
  ASGD_RETURN_IF_ERROR(ParseFromByteBuffer(buffer, &reply, "push reply"));
  ServerPushReply out;
  out.applied = reply.result() == asgd::v1::PushReply::APPLIED;
  out.staleness = reply.staleness();
  out.pull_required = reply.pull_required();
  return out;
}

asgd::v1::PushChunk PushCommitMessage(uint64_t version, uint64_t chunks) {
  asgd::v1::PushChunk msg;
  msg.set_model_version(version);
  msg.mutable_commit()->set_num_chunks(chunks);
  return msg;
}

// Message `c` of a push at `version`: float values encoded straight into the
// outgoing slice (one pass over them), or a compressed chunk's bytes.
grpc::ByteBuffer ChunkMessage(const ModelLayout& layout, const ServerPush& push,
                              const EncodedChunk& c, uint64_t version) {
  const std::string& name = layout.tensors()[c.ref.tensor].name;
  if (push.compressed()) {
    return EncodeCompressedChunkMessage(version, name, c.ref.offset,
                                        push.encoding, c.bytes);
  }
  const WireDtype dtype = static_cast<WireDtype>(push.encoding);
  return EncodeChunkMessage(
      ChunkMessageKind::kPush, version, name, c.ref.offset, dtype, c.ref.count,
      [&](char* out) {
        if (!c.bf16.empty()) {  // rounded already (a backend's TakeBf16)
          std::memcpy(out, c.bf16.data(), c.ref.count * sizeof(uint16_t));
        } else {
          EncodeFloats(c.values.data(), c.ref.count, dtype, out);
        }
      });
}

grpc::ChannelArguments ChannelArgs() {
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
  return args;
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
  const grpc::ChannelArguments args = ChannelArgs();
  std::vector<asgd::v1::ModelDescription> descs(addresses.size());
  std::vector<std::unique_ptr<Server>> servers(addresses.size());
  for (size_t i = 0; i < addresses.size(); ++i) {
    ASGD_ASSIGN_OR_RETURN(std::shared_ptr<grpc::Channel> channel,
                          MakeChannel(addresses[i], options.security, args));
    auto stub = asgd::v1::ParameterServer::NewStub(channel);
    grpc::ClientContext ctx;
    ctx.set_wait_for_ready(true);  // servers may still be starting
    SetDeadline(&ctx, options.connect_timeout);
    asgd::v1::ModelDescription& d = descs[i];
    grpc::Status s = stub->DescribeModel(&ctx, {}, &d);
    if (!s.ok()) {
      return WithServer(addresses[i],
                        absl::Status(FromGrpcStatus(s).code(),
                                     absl::StrCat("DescribeModel failed: ",
                                                  s.error_message())));
    }
    ASGD_RETURN_IF_ERROR(CheckDescription(addresses[i], d, addresses[0],
                                          descs[0], addresses.size(), options,
                                          push_encoding));
    if (d.server_index() >= addresses.size() ||
        servers[d.server_index()] != nullptr) {
      return absl::FailedPreconditionError(absl::StrCat(
          "server ", addresses[i], " says it is index ", d.server_index(),
          ", which is out of range or taken by another address"));
    }
    auto server = std::make_unique<Server>();
    server->address = addresses[i];
    server->stub = std::move(stub);
    server->raw_stub = std::make_unique<grpc::GenericStub>(channel);
    servers[d.server_index()] = std::move(server);
  }
  ASGD_ASSIGN_OR_RETURN(auto pool, PoolModel(descs[0]));
  auto client = std::unique_ptr<GrpcParamClient>(new GrpcParamClient(
      options, std::move(pool.second), std::move(pool.first)));
  client->attributes_.insert(descs[0].model_attributes().begin(),
                             descs[0].model_attributes().end());
  ASGD_RETURN_IF_ERROR(
      client->Configure(descs, push_encoding, std::move(servers)));
  return client;
}

absl::Status GrpcParamClient::Configure(
    const std::vector<asgd::v1::ModelDescription>& descs,
    PushEncoding push_encoding, std::vector<std::unique_ptr<Server>> servers) {
  // The server's own limit bounds both directions; 4 bytes each, it must stay
  // well under gRPC's 4 MB default message size.
  max_chunk_elements_ = static_cast<int64_t>(descs[0].max_chunk_elements());
  if (max_chunk_elements_ < 1 || max_chunk_elements_ > (int64_t{3} << 20) / 4) {
    return absl::FailedPreconditionError(absl::StrCat(
        "server chunk limit ", descs[0].max_chunk_elements(),
        " elements is outside [1, 786432]"));
  }
  uint64_t compressed_limit = ~uint64_t{0};
  for (const auto& d : descs) {
    const int limit = static_cast<int>(
        std::min<uint32_t>(d.max_push_minibatches(), 1u << 20));
    if (limit > 0 &&
        (max_push_minibatches_ == 0 || limit < max_push_minibatches_)) {
      max_push_minibatches_ = limit;
    }
    compressed_limit =
        std::min<uint64_t>(compressed_limit, d.max_compressed_chunk_elements());
  }
  PushEncoderOptions encoder_options;
  encoder_options.wire_dtype = options_.wire_dtype;
  encoder_options.push_encoding = push_encoding;
  encoder_options.top_k_fraction = options_.top_k_fraction;
  encoder_options.max_chunk_elements = max_chunk_elements_;
  if (IsCompressed(push_encoding)) {
    encoder_options.compressed_chunk_elements =
        PushEncoder::CompressedChunkElements(
            layout_, push_encoding, options_.top_k_fraction, compressed_limit);
  }
  ASGD_ASSIGN_OR_RETURN(encoder_, PushEncoder::Create(layout_, encoder_options));
  // Delta pulls: float32 pulls, from servers that offer them.
  use_delta_ =
      options_.delta_pulls && options_.wire_dtype == WireDtype::kFloat32;
  int replay_threads = options_.replay_threads;
  if (replay_threads < 0 || replay_threads > 64) {
    return absl::InvalidArgumentError(absl::StrCat(
        "replay_threads=", replay_threads, " is outside [0, 64]"));
  }
  if (replay_threads == 0) {
    const int cores = static_cast<int>(std::thread::hardware_concurrency());
    replay_threads = std::clamp(
        cores / (2 * static_cast<int>(servers.size())), 1, 4);
  }
  for (size_t s = 0; s < servers.size(); ++s) {
    Server& server = *servers[s];
    server.delta = use_delta_ && descs[s].delta_pulls();
    absl::MutexLock lock(&server.pull_mu);
    if (server.delta && replay_threads > 1) {
      server.replay = std::make_unique<PartRunner>(replay_threads);
    }
    server.copy.max_compressed_elements =
        static_cast<int64_t>(std::min<uint64_t>(
            descs[s].max_compressed_chunk_elements(), kGradCodecMaxElements));
  }
  servers_ = std::move(servers);
  return absl::OkStatus();
}

absl::Status GrpcParamClient::KeepExactCopiesOn(
    const ExactCopyFactory& factory) {
  if (!use_delta_) {
    return absl::UnimplementedError(
        "exact copies are kept for delta pulls, and this client does not "
        "ask for them (float32 pulls with --delta_pulls)");
  }
  absl::Status status;
  bool made_any = false;
  for (size_t s = 0; s < servers_.size(); ++s) {
    Server& server = *servers_[s];
    if (!server.delta) continue;
    absl::MutexLock lock(&server.pull_mu);
    DeltaCopy& copy = server.copy;
    copy.version.reset();  // the next pull sends weights
    copy.values = std::vector<float>();
    copy.keep = std::vector<uint8_t>();
    copy.device.reset();
    if (!status.ok()) continue;  // drop the rest too
    const int64_t count = layout_.ServerRange(static_cast<int>(s)).size();
    absl::StatusOr<std::unique_ptr<ExactCopy>> made = factory(count);
    if (made.ok() && (*made == nullptr || (*made)->size() != count)) {
      made = absl::InternalError(absl::StrCat(
          "the exact-copy factory made no copy of ", count, " floats"));
    }
    if (made.ok()) {
      copy.device = *std::move(made);
      made_any = true;
    } else {
      status = made.status();
    }
  }
  copies_elsewhere_.store(status.ok() && made_any);
  if (status.ok()) return status;
  for (auto& server : servers_) {  // all or none
    absl::MutexLock lock(&server->pull_mu);
    server->copy.device.reset();
  }
  return absl::Status(status.code(),
                      absl::StrCat("exact copies for delta pulls: ",
                                   status.message()));
}

DeltaPullStats GrpcParamClient::delta_pull_stats() const {
  DeltaPullStats stats;
  stats.update_pulls = update_pulls_.load();
  stats.weight_pulls = exact_weight_pulls_.load();
  stats.update_bytes = update_bytes_.load();
  stats.copies_elsewhere = copies_elsewhere_.load();
  stats.plan_bytes = plan_bytes_.load();
  return stats;
}

int64_t GrpcParamClient::streams_opened() const { return streams_opened_.load(); }

std::vector<float> GrpcParamClient::Residual(int server) const {
  return encoder_->Residual(server);
}

ClientStream& GrpcParamClient::OpenStream(Server& server, bool pull,
                                          absl::Time deadline) {
  std::unique_ptr<ClientStream>& stream =
      pull ? server.pull_stream : server.push_stream;
  if (stream == nullptr) {
    // A pull waits (within its deadline) for a server that is away
    // (restarting): it goes out as soon as the channel reconnects.
    stream = std::make_unique<ClientStream>(
        server.raw_stub.get(), pull ? kPullStreamMethod : kPushStreamMethod,
        /*wait_for_ready=*/pull, deadline);
    streams_opened_.fetch_add(1);
  }
  return *stream;
}

absl::StatusOr<uint64_t> GrpcParamClient::PullFrom(int server_index,
                                                   PullSink* sink,
                                                   int admm_slot) {
  Server& server = *servers_[server_index];
  const FlatRange range = layout_.ServerRange(server_index);
  const absl::Time deadline = absl::Now() + options_.rpc_timeout;
  absl::MutexLock lock(&server.pull_mu);
  asgd::v1::PullRequest request;
  request.set_worker_id(options_.worker_id);
  request.set_dtype(static_cast<asgd::v1::WireDtype>(options_.wire_dtype));
  const bool delta = server.delta && admm_slot < 0;
  if (admm_slot >= 0) request.set_admm_slot(admm_slot);
  // A delta pull: the copy is lost until a reply makes it exact again.
  std::optional<uint64_t> held;
  if (delta) {
    held = server.copy.BeginDelta(range);
    request.set_delta(true);
    // Host and device copies replay a pruned model's mask (DeltaReceiver).
    request.set_replays_mask(true);
    if (held.has_value()) {
      request.set_has_copy(true);
      request.set_model_version(*held);
      request.set_lineage(server.copy.lineage);
    }
  }
  const grpc::ByteBuffer request_buffer = SerializeToByteBuffer(request);
  const absl::Span<float> staging = sink->Staging(range);
  // At most two tries: a second one only when the first found the stream
  // closed as idle by the server (nothing was asked of it).
  for (int attempt = 0;; ++attempt) {
    const bool fresh = server.pull_stream == nullptr;
    RawCall& call = OpenStream(server, /*pull=*/true, deadline).call();
    PullReader reader(&layout_, range, max_chunk_elements_, staging,
                      delta ? &server.copy : nullptr, held,
                      server.replay.get());
    absl::Status bad;
    const bool sent = call.Write(request_buffer, deadline);
    grpc::ByteBuffer buffer;
    ReceivedMessage received;
    PullMessage msg;
    while (sent && bad.ok() && !reader.done() && call.Read(&buffer, deadline)) {
      bad = DecodePullChunk(buffer, &received, &msg);
      if (bad.ok()) bad = reader.Add(msg);
    }
    if (bad.ok() && reader.done()) {
      ASGD_ASSIGN_OR_RETURN(const uint64_t version, reader.Finish());
      if (reader.exact() && server.copy.device != nullptr) {
        absl::Status committed = sink->CommitCopy(range, *server.copy.device);
        if (!committed.ok()) {
          server.copy.version.reset();  // unknown: weights next time
          return committed;
        }
      } else {
        ASGD_RETURN_IF_ERROR(sink->Commit(range));
      }
      if (reader.exact()) {
        (reader.received_weights() ? exact_weight_pulls_ : update_pulls_)
            .fetch_add(1, std::memory_order_relaxed);
        update_bytes_.fetch_add(reader.update_bytes(),
                                std::memory_order_relaxed);
        plan_bytes_.fetch_add(reader.plan_bytes(), std::memory_order_relaxed);
      }
      return version;
    }
    // The call is over (or must be): its status says why.
    if (!bad.ok()) call.Cancel();
    const grpc::Status status = call.Finish(deadline);
    const absl::Status final_status = FromGrpcStatus(status, call.context());
    server.pull_stream.reset();
    if (!bad.ok()) return bad;
    if (final_status.ok() && !reader.started() && !fresh && attempt == 0) {
      continue;  // closed as idle before our request: ask a new stream
    }
    if (final_status.ok()) {
      return absl::UnavailableError(
          "the pull stream ended before the pull was complete");
    }
    return final_status;
  }
}

absl::Status GrpcParamClient::Pull(PullSink* sink,
                                   std::vector<uint64_t>* versions) {
  return PullAll(sink, versions, /*admm_slot=*/-1);
}

absl::Status GrpcParamClient::PullAdmmSlot(int slot, absl::Span<float> values) {
  if (slot < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("ADMM slot ", slot, " is negative"));
  }
  HostPullSink sink(values);
  std::vector<uint64_t> versions;
  return PullAll(&sink, &versions, slot);
}

absl::Status GrpcParamClient::PullAll(PullSink* sink,
                                      std::vector<uint64_t>* versions,
                                      int admm_slot) {
  if (sink->size() != layout_.total_size()) {
    return absl::InvalidArgumentError("pull buffer has the wrong size");
  }
  const int n = static_cast<int>(servers_.size());
  std::vector<std::future<absl::StatusOr<uint64_t>>> futures;
  for (int s = 1; s < n; ++s) {
    futures.push_back(std::async(
        std::launch::async,
        [this, s, sink, admm_slot] { return PullFrom(s, sink, admm_slot); }));
  }
  absl::StatusOr<uint64_t> first = PullFrom(0, sink, admm_slot);
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

absl::StatusOr<ServerPushReply> GrpcParamClient::PushTo(
    int server_index, const ServerPush& push, uint64_t version,
    int num_minibatches) {
  Server& server = *servers_[server_index];
  const grpc::ByteBuffer header = SerializeToByteBuffer(PushHeaderMessage(
      options_.worker_id, version, num_minibatches, push.kind, push.admm_slot));
  const grpc::ByteBuffer commit =
      SerializeToByteBuffer(PushCommitMessage(version, push.chunks.size()));
  const absl::Time deadline = absl::Now() + options_.rpc_timeout;
  absl::MutexLock lock(&server.push_mu);
  for (int attempt = 0;; ++attempt) {
    const bool fresh = server.push_stream == nullptr;
    RawCall& call = OpenStream(server, /*pull=*/false, deadline).call();
    bool ok = call.Write(header, deadline);
    for (size_t i = 0; ok && i < push.chunks.size(); ++i) {
      push_bytes_.fetch_add(push.data_bytes(push.chunks[i]),
                            std::memory_order_relaxed);
      ok = call.Write(ChunkMessage(layout_, push, push.chunks[i], version),
                      deadline);
    }
    if (ok) ok = call.Write(commit, deadline);
    grpc::ByteBuffer reply_buffer;
    if (call.Read(&reply_buffer, deadline)) {
      absl::StatusOr<ServerPushReply> reply = ParsePushReply(reply_buffer);
      if (!reply.ok()) server.push_stream.reset();
      return reply;
    }
    const grpc::Status status = call.Finish(deadline);
    absl::Status final_status = FromGrpcStatus(status, call.context());
    server.push_stream.reset();
    if (final_status.ok() && !fresh && attempt == 0) {
      continue;  // closed as idle before our push: send it on a new stream
    }
    if (final_status.ok()) {
      return absl::UnavailableError(
          "the push stream ended before the push was answered");
    }
    return final_status;
  }
}

absl::StatusOr<ServerPushReply> GrpcParamClient::EncodeAndPush(
    int server, absl::Span<const float> gradient, uint64_t version,
    int num_minibatches, PushKind kind) {
  ASGD_ASSIGN_OR_RETURN(const ServerPush push,
                        encoder_->Encode(server, gradient, kind));
  absl::StatusOr<ServerPushReply> reply =
      PushTo(server, push, version, num_minibatches);
  encoder_->Settle(server, push, reply.ok() && reply->applied);
  return reply;
}

std::vector<absl::StatusOr<ServerPushReply>> GrpcParamClient::PushEncoded(
    const std::vector<ServerPush>& parts,
    const std::vector<uint64_t>& versions, int num_minibatches) {
  const size_t n = servers_.size();
  if (parts.size() != n || versions.size() != n) {
    return std::vector<absl::StatusOr<ServerPushReply>>(
        n, absl::InvalidArgumentError("push parts or versions wrong size"));
  }
  std::vector<std::future<absl::StatusOr<ServerPushReply>>> futures;
  for (size_t s = 1; s < n; ++s) {
    futures.push_back(std::async(std::launch::async, [&, s] {
      return PushTo(s, parts[s], versions[s], num_minibatches);
    }));
  }
  std::vector<absl::StatusOr<ServerPushReply>> replies;
  replies.push_back(PushTo(0, parts[0], versions[0], num_minibatches));
  for (auto& f : futures) replies.push_back(f.get());
  for (size_t s = 0; s < n; ++s) {
    if (!replies[s].ok()) {
      replies[s] = WithServer(servers_[s]->address, replies[s].status());
    }
  }
  return replies;
}

absl::StatusOr<PushOutcome> GrpcParamClient::Push(
    absl::Span<const float> gradient, const std::vector<uint64_t>& versions,
    int num_minibatches, PushKind kind) {
  const int n = static_cast<int>(servers_.size());
  if (static_cast<int64_t>(gradient.size()) != layout_.total_size() ||
      static_cast<int>(versions.size()) != n) {
    return absl::InvalidArgumentError("push gradient or versions wrong size");
  }
  std::vector<std::future<absl::StatusOr<ServerPushReply>>> futures;
  for (int s = 1; s < n; ++s) {
    futures.push_back(std::async(std::launch::async, [=] {
      return EncodeAndPush(s, gradient, versions[s], num_minibatches, kind);
    }));
  }
  std::vector<absl::StatusOr<ServerPushReply>> replies;
  replies.push_back(
      EncodeAndPush(0, gradient, versions[0], num_minibatches, kind));
  for (auto& f : futures) replies.push_back(f.get());
  int failed = 0;
  absl::StatusOr<PushOutcome> outcome = SumUpPushReplies(replies, &failed);
  if (!outcome.ok()) {
    return WithServer(servers_[failed]->address, outcome.status());
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
