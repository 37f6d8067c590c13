#include "compression/grad_encoder.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"

namespace asgd {

absl::StatusOr<GradEncoder> GradEncoder::Create(
    const ModelLayout& layout, FlatRange range,
    const GradEncoderOptions& options) {
  if (range.begin < 0 || range.begin > range.end ||
      range.end > layout.total_size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "encoder range [", range.begin, ", ", range.end,
        ") is not inside the model's ", layout.total_size(), " elements"));
  }
  if (options.encoding == GradEncoding::kTopK &&
      !(options.top_k_fraction > 0.0 && options.top_k_fraction <= 1.0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "top-k fraction must be in (0, 1], got ", options.top_k_fraction));
  }
  if (options.max_group_size < 1 ||
      options.max_group_size > kGradCodecMaxGroupSize) {
    return absl::InvalidArgumentError(
        absl::StrCat("max group size must be in [1, ", kGradCodecMaxGroupSize,
                     "], got ", options.max_group_size));
  }
  if (options.encoding != GradEncoding::kOneBit &&
      options.encoding != GradEncoding::kTopK) {
    return absl::InvalidArgumentError("unknown gradient encoding");
  }
  GradEncoder encoder(range, options);
  const int num_tensors = static_cast<int>(layout.tensors().size());
  for (int t = 0; t < num_tensors; ++t) {
    encoder.tensor_offsets_.push_back(layout.tensor_offset(t));
    encoder.tensor_sizes_.push_back(layout.tensor_size(t));
    const std::vector<int64_t>& shape = layout.tensors()[t].shape;
    const int64_t last = shape.empty() ? 1 : shape.back();
    encoder.group_sizes_.push_back(std::min(last, options.max_group_size));
  }
  return encoder;
}

OneBitGroups GradEncoder::GroupsOf(const ChunkRef& chunk) const {
  const int64_t g = group_sizes_[chunk.tensor];
  return {g, std::min(chunk.count, g - chunk.offset % g)};
}

absl::Status GradEncoder::CheckChunk(const ChunkRef& chunk) const {
  const bool tensor_ok =
      chunk.tensor >= 0 &&
      chunk.tensor < static_cast<int>(tensor_sizes_.size()) &&
      chunk.offset >= 0 && chunk.count >= 1 &&
      chunk.offset + chunk.count <= tensor_sizes_[chunk.tensor] &&
      chunk.flat_begin == tensor_offsets_[chunk.tensor] + chunk.offset;
  if (!tensor_ok || chunk.flat_begin < range_.begin ||
      chunk.flat_begin + chunk.count > range_.end) {
    return absl::InvalidArgumentError(
        absl::StrCat("chunk (tensor ", chunk.tensor, ", offset ", chunk.offset,
                     ", ", chunk.count, " elements at flat ", chunk.flat_begin,
                     ") is not inside one tensor of the encoder's range [",
                     range_.begin, ", ", range_.end, ")"));
  }
  return absl::OkStatus();
}

absl::Status GradEncoder::EncodeChunk(const ChunkRef& chunk,
                                      const float* gradient, std::string* out) {
  if (absl::Status s = CheckChunk(chunk); !s.ok()) return s;
  const absl::Span<const float> g(gradient, chunk.count);
  const absl::Span<float> r(Residual() + (chunk.flat_begin - range_.begin),
                            chunk.count);
  if (options_.encoding == GradEncoding::kTopK) {
    return EncodeTopK(g, TopKCount(options_.top_k_fraction, chunk.count), r,
                      out);
  }
  const OneBitGroups groups = GroupsOf(chunk);
  return EncodeOneBit(g, groups.group_size, groups.first_group, r, out);
}

absl::Status GradEncoder::Restore(const ChunkRef& chunk,
                                  absl::string_view bytes) {
  if (absl::Status s = CheckChunk(chunk); !s.ok()) return s;
  CodecLimits limits;
  limits.max_elements = chunk.count;
  limits.max_group_size = kGradCodecMaxGroupSize;
  std::vector<float> decoded(chunk.count);
  if (absl::Status s =
          DecodeCompressedChunk(bytes, limits, absl::MakeSpan(decoded));
      !s.ok()) {
    return s;
  }
  float* r = Residual() + (chunk.flat_begin - range_.begin);
  for (int64_t i = 0; i < chunk.count; ++i) r[i] += decoded[i];
  return absl::OkStatus();
}

float* GradEncoder::Residual() {
  if (residual_.empty()) residual_.assign(range_.size(), 0.0f);
  return residual_.data();
}

void GradEncoder::ResetResidual() {
  std::fill(residual_.begin(), residual_.end(), 0.0f);
}

}  // namespace asgd
