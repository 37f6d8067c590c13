#include "worker/ps/push_encoder.h"

#include <algorithm>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "compression/grad_codec.h"

namespace asgd {
namespace {

// The most bytes one compressed chunk message should carry: well under the
// servers' 4 MiB message limit.
constexpr double kCompressedChunkBytes = 3 << 20;

// Hands the chunks of `push` back to `encoder`'s residual.
void RestoreChunks(GradEncoder& encoder, const std::vector<EncodedChunk>& chunks) {
  for (const EncodedChunk& c : chunks) {
    // Cannot fail: the bytes are what EncodeChunk wrote for that chunk.
    const absl::Status s = encoder.Restore(c.ref, c.bytes);
    (void)s;
  }
}

}  // namespace

int64_t PushEncoder::CompressedChunkElements(const ModelLayout& layout,
                                             PushEncoding encoding,
                                             double top_k_fraction,
                                             uint64_t server_limit) {
  int64_t min_group = GradEncoderOptions().max_group_size;
  for (const TensorSpec& t : layout.tensors()) {
    min_group =
        std::min<int64_t>(min_group, t.shape.empty() ? 1 : t.shape.back());
  }
  const double bytes_per_element =
      encoding == PushEncoding::kTopK
          ? 8.0 * top_k_fraction
          : 0.125 + 8.0 / static_cast<double>(std::max<int64_t>(min_group, 1));
  const int64_t elements = static_cast<int64_t>(std::min<double>(
      static_cast<double>(std::min<uint64_t>(server_limit,
                                             kGradCodecMaxElements)),
      kCompressedChunkBytes / bytes_per_element));
  return std::max<int64_t>(elements, 1);
}

absl::StatusOr<std::unique_ptr<PushEncoder>> PushEncoder::Create(
    const ModelLayout& layout, const PushEncoderOptions& options) {
  const PushEncoding encoding = options.push_encoding.value_or(
      static_cast<PushEncoding>(options.wire_dtype));
  const bool compressed = IsCompressed(encoding);
  if (options.max_chunk_elements < 1 ||
      (compressed && options.compressed_chunk_elements < 1)) {
    return absl::InvalidArgumentError("push chunk limits must be at least 1");
  }
  GradEncoderOptions encoder_options;
  encoder_options.encoding = encoding == PushEncoding::kTopK
                                 ? GradEncoding::kTopK
                                 : GradEncoding::kOneBit;
  encoder_options.top_k_fraction = options.top_k_fraction;
  auto out = std::unique_ptr<PushEncoder>(new PushEncoder(options, encoding));
  out->model_size_ = layout.total_size();
  for (int s = 0; s < layout.num_servers(); ++s) {
    auto server = std::make_unique<PerServer>();
    server->range = layout.ServerRange(s);
    server->float_plan =
        PlanChunks(layout, server->range, options.max_chunk_elements);
    if (compressed) {
      server->compressed_plan =
          PlanChunks(layout, server->range, options.compressed_chunk_elements);
      absl::StatusOr<GradEncoder> encoder =
          GradEncoder::Create(layout, server->range, encoder_options);
      if (!encoder.ok()) return encoder.status();
      absl::MutexLock lock(&server->mu);
      server->encoder.emplace(*std::move(encoder));
    }
    out->servers_.push_back(std::move(server));
  }
  if (compressed) {
    // The whole-model plans, server after server (Split* cut them back).
    std::vector<OneBitChunkPlan> chunks;
    size_t planned = 0;
    for (const auto& server : out->servers_) {
      out->first_chunk_.push_back(planned);
      absl::MutexLock lock(&server->mu);
      for (const ChunkRef& c : server->compressed_plan) {
        if (encoding == PushEncoding::kTopK) {
          out->top_k_plan_.chunks.push_back(
              {c.flat_begin, c.count,
               TopKCount(options.top_k_fraction, c.count)});
        } else {
          const OneBitGroups g = server->encoder->GroupsOf(c);
          chunks.push_back(
              {c.flat_begin, c.count, g.group_size, g.first_group});
        }
        ++planned;
      }
    }
    out->first_chunk_.push_back(planned);
    if (encoding == PushEncoding::kOneBit) {
      out->one_bit_plan_ = MakeOneBitPlan(std::move(chunks));
    }
  }
  return out;
}

absl::StatusOr<std::vector<ServerPush>> PushEncoder::SplitOneBit(
    absl::Span<const char> bytes) const {
  const OneBitPlan& plan = one_bit_plan_;
  if (encoding_ != PushEncoding::kOneBit ||
      static_cast<int64_t>(bytes.size()) != plan.total_bytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "SplitOneBit: ", bytes.size(), " bytes for a 1-bit plan of ",
        plan.total_bytes));
  }
  std::vector<ServerPush> pushes(servers_.size());
  for (size_t s = 0; s < servers_.size(); ++s) {
    ServerPush& push = pushes[s];
    push.kind = PushKind::kGradient;
    push.encoding = PushEncoding::kOneBit;
    const std::vector<ChunkRef>& refs = servers_[s]->compressed_plan;
    for (size_t k = 0; k < refs.size(); ++k) {
      const size_t c = first_chunk_[s] + k;
      push.chunks.push_back(
          {refs[k], {},
           std::string(bytes.data() + plan.offsets[c], plan.ChunkBytes(c))});
    }
  }
  return pushes;
}

absl::StatusOr<std::vector<ServerPush>> PushEncoder::SplitTopK(
    std::vector<std::string> chunks) const {
  if (encoding_ != PushEncoding::kTopK ||
      chunks.size() != top_k_plan_.chunks.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "SplitTopK: ", chunks.size(), " chunks for a top-k plan of ",
        top_k_plan_.chunks.size()));
  }
  std::vector<ServerPush> pushes(servers_.size());
  for (size_t s = 0; s < servers_.size(); ++s) {
    ServerPush& push = pushes[s];
    push.kind = PushKind::kGradient;
    push.encoding = PushEncoding::kTopK;
    const std::vector<ChunkRef>& refs = servers_[s]->compressed_plan;
    for (size_t k = 0; k < refs.size(); ++k) {
      push.chunks.push_back(
          {refs[k], {}, std::move(chunks[first_chunk_[s] + k])});
    }
  }
  return pushes;
}

absl::StatusOr<std::vector<ServerPush>> PushEncoder::SplitBf16(
    absl::Span<const uint16_t> values) const {
  if (encoding_ != PushEncoding::kBfloat16 ||
      static_cast<int64_t>(values.size()) != model_size_) {
    return absl::InvalidArgumentError(absl::StrCat(
        "SplitBf16: ", values.size(), " values for a bf16 push of a model of ",
        model_size_));
  }
  std::vector<ServerPush> pushes(servers_.size());
  for (size_t s = 0; s < servers_.size(); ++s) {
    ServerPush& push = pushes[s];
    push.kind = PushKind::kGradient;
    push.encoding = PushEncoding::kBfloat16;
    for (const ChunkRef& c : servers_[s]->float_plan) {
      EncodedChunk chunk{c, {}, std::string()};
      chunk.bf16 = values.subspan(c.flat_begin, c.count);
      push.chunks.push_back(std::move(chunk));
    }
  }
  return pushes;
}

absl::Status PushEncoder::ForEachDecoded(
    const ServerPush& push,
    const std::function<absl::Status(int64_t, absl::Span<const float>)>&
        restore) {
  if (!push.compressed()) return absl::OkStatus();
  CodecLimits limits;
  limits.max_elements = kGradCodecMaxElements;
  limits.max_group_size = kGradCodecMaxGroupSize;
  std::vector<std::vector<float>> decoded(push.chunks.size());
  for (size_t k = 0; k < push.chunks.size(); ++k) {
    decoded[k].resize(push.chunks[k].ref.count);
    if (absl::Status s = DecodeCompressedChunk(push.chunks[k].bytes, limits,
                                               absl::MakeSpan(decoded[k]));
        !s.ok()) {
      return s;
    }
  }
  for (size_t k = 0; k < push.chunks.size(); ++k) {
    if (absl::Status s = restore(push.chunks[k].ref.flat_begin, decoded[k]);
        !s.ok()) {
      return s;
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<ServerPush> PushEncoder::Encode(int server,
                                               absl::Span<const float> gradient,
                                               PushKind kind) {
  const bool compressed = kind == PushKind::kGradient && IsCompressed(encoding_);
  if (!compressed) {
    ServerPush push = EncodeUncompressed(server, gradient, kind);
    if (kind == PushKind::kGradient) push.encoding = encoding_;
    return push;
  }
  PerServer& ps = *servers_[server];
  ServerPush push;
  push.kind = kind;
  push.encoding = encoding_;
  push.chunks.reserve(ps.compressed_plan.size());
  absl::MutexLock lock(&ps.mu);
  for (const ChunkRef& c : ps.compressed_plan) {
    EncodedChunk chunk{c, {}, std::string()};
    absl::Status s = ps.encoder->EncodeChunk(c, gradient.data() + c.flat_begin,
                                             &chunk.bytes);
    if (!s.ok()) {
      RestoreChunks(*ps.encoder, push.chunks);
      return s;
    }
    push.chunks.push_back(std::move(chunk));
  }
  return push;
}

ServerPush PushEncoder::EncodeUncompressed(int server,
                                           absl::Span<const float> values,
                                           PushKind kind) const {
  const PerServer& ps = *servers_[server];
  ServerPush push;
  push.kind = kind;
  push.encoding = static_cast<PushEncoding>(options_.wire_dtype);
  push.chunks.reserve(ps.float_plan.size());
  for (const ChunkRef& c : ps.float_plan) {
    push.chunks.push_back(
        {c, values.subspan(c.flat_begin, c.count), std::string()});
  }
  return push;
}

void PushEncoder::Settle(int server, const ServerPush& push, bool applied) {
  if (applied || !push.compressed()) return;
  PerServer& ps = *servers_[server];
  absl::MutexLock lock(&ps.mu);
  RestoreChunks(*ps.encoder, push.chunks);
}

std::vector<float> PushEncoder::Residual(int server) const {
  const PerServer& ps = *servers_[server];
  absl::MutexLock lock(&ps.mu);
  if (!ps.encoder.has_value()) return {};
  const absl::Span<const float> r = ps.encoder->residual();
  if (r.empty()) return std::vector<float>(ps.encoder->range().size(), 0.0f);
  return std::vector<float>(r.begin(), r.end());
}

}  // namespace asgd
