// The compressed formats' common header, parsing dispatch and decoding
// (the formats themselves: grad_codec_one_bit.cc, grad_codec_top_k.cc).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "compression/grad_codec.h"
#include "compression/grad_codec_internal.h"

namespace asgd {
namespace grad_codec_internal {

absl::Status CheckEncodeSizes(absl::string_view what,
                              absl::Span<const float> gradient,
                              absl::Span<float> residual) {
  if (gradient.empty() ||
      static_cast<int64_t>(gradient.size()) > kGradCodecMaxElements) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " encode: ", gradient.size(),
                     " elements, want 1 to ", kGradCodecMaxElements));
  }
  if (residual.size() != gradient.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " encode: residual of ", residual.size(),
                     " elements for a gradient of ", gradient.size()));
  }
  return absl::OkStatus();
}

absl::Status NonFinite(absl::string_view what) {
  return absl::InvalidArgumentError(
      absl::StrCat(what, " encode: gradient + residual holds NaN or Inf"));
}


}  // namespace grad_codec_internal

using grad_codec_internal::Load;
using grad_codec_internal::ReadVarint;
using grad_codec_internal::ParseOneBit;
using grad_codec_internal::DecodeOneBit;
using grad_codec_internal::ParseTopK;
using grad_codec_internal::DecodeTopK;

absl::string_view GradEncodingName(GradEncoding encoding) {
  return encoding == GradEncoding::kTopK ? "topk" : "onebit";
}

absl::StatusOr<CompressedChunk> ParseCompressedChunk(
    absl::string_view data, const CodecLimits& limits) {
  if (static_cast<int64_t>(data.size()) < kGradCodecHeaderBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("compressed chunk: ", data.size(),
                     " bytes, shorter than the 16-byte header"));
  }
  const uint8_t encoding = static_cast<uint8_t>(data[0]);
  const uint8_t version = static_cast<uint8_t>(data[1]);
  const uint16_t flags = Load<uint16_t>(data.data() + 2);
  const int64_t count = Load<uint32_t>(data.data() + 4);
  const int64_t a = Load<uint32_t>(data.data() + 8);
  const int64_t b = Load<uint32_t>(data.data() + 12);
  if (encoding != static_cast<uint8_t>(GradEncoding::kOneBit) &&
      encoding != static_cast<uint8_t>(GradEncoding::kTopK)) {
    return absl::InvalidArgumentError(
        absl::StrCat("compressed chunk: unknown encoding ", encoding,
                     " (want 1 = one-bit or 2 = top-k)"));
  }
  if (version != kGradCodecVersion) {
    return absl::InvalidArgumentError(absl::StrCat(
        "compressed chunk: format version ", version,
        " not supported (this build reads version ", kGradCodecVersion, ")"));
  }
  if (flags != 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "compressed chunk: flags 0x%04x not supported (want 0)", flags));
  }
  const int64_t max_elements = std::min(
      std::max<int64_t>(limits.max_elements, 1), kGradCodecMaxElements);
  if (count < 1 || count > max_elements) {
    return absl::InvalidArgumentError(
        absl::StrCat("compressed chunk: element count ", count,
                     " out of range [1, ", max_elements, "]"));
  }
  CompressedChunk chunk;
  chunk.encoding = static_cast<GradEncoding>(encoding);
  chunk.count = count;
  absl::Status status = chunk.encoding == GradEncoding::kOneBit
                            ? ParseOneBit(data, count, a, b, limits, &chunk)
                            : ParseTopK(data, count, a, b, &chunk);
  if (!status.ok()) return status;
  return chunk;
}

void DecodeCompressed(const CompressedChunk& chunk, int64_t begin, int64_t end,
                      float* out) {
  if (begin >= end) return;
  if (chunk.encoding == GradEncoding::kOneBit) {
    DecodeOneBit(chunk, begin, end, out);
  } else {
    DecodeTopK(chunk, begin, end, out);
  }
}

absl::Status DecodeCompressedChunk(absl::string_view data,
                                   const CodecLimits& limits,
                                   absl::Span<float> out) {
  absl::StatusOr<CompressedChunk> chunk = ParseCompressedChunk(data, limits);
  if (!chunk.ok()) return chunk.status();
  if (static_cast<int64_t>(out.size()) != chunk->count) {
    return absl::InvalidArgumentError(
        absl::StrCat("compressed chunk: ", chunk->count, " elements, expected ",
                     out.size()));
  }
  DecodeCompressed(*chunk, 0, chunk->count, out.data());
  return absl::OkStatus();
}

bool TopKReader::Next(int64_t* index, float* value) {
  if (left_ == 0) return false;
  --left_;
  index_ += 1 + static_cast<int64_t>(ReadVarint(p_));
  *index = index_;
  *value = Load<float>(values_);
  values_ += 4;
  return true;
}


}  // namespace asgd
