#include "compression/top_k_plan.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "compression/grad_codec.h"
#include "compression/plan_encode.h"

namespace asgd {
namespace {

void PutU32(uint32_t v, char* p) {
  for (int b = 0; b < 4; ++b) p[b] = static_cast<char>((v >> (8 * b)) & 0xff);
}

}  // namespace

int64_t TopKPlan::total_k() const {
  int64_t k = 0;
  for (const TopKChunkPlan& c : chunks) k += c.k;
  return k;
}

int64_t TopKPlan::max_count() const {
  int64_t n = 0;
  for (const TopKChunkPlan& c : chunks) n = std::max(n, c.count);
  return n;
}

absl::Status TopKPlan::Validate(int64_t model_size) const {
  int64_t end_of_previous = 0;
  for (size_t c = 0; c < chunks.size(); ++c) {
    const TopKChunkPlan& p = chunks[c];
    if (p.count < 1 || p.count > kGradCodecMaxElements || p.flat_begin < 0 ||
        p.flat_begin > model_size - p.count || p.k < 0 || p.k > p.count) {
      return absl::InvalidArgumentError(absl::StrCat(
          "top-k plan: chunk ", c, " (begin ", p.flat_begin, ", count ",
          p.count, ", k ", p.k, ") is not a valid chunk of a ", model_size,
          "-element model"));
    }
    if (c > 0 && p.flat_begin < end_of_previous) {
      return absl::InvalidArgumentError(absl::StrCat(
          "top-k plan: chunk ", c, " overlaps or precedes the one before"));
    }
    end_of_previous = p.flat_begin + p.count;
  }
  return absl::OkStatus();
}

absl::Status EncodeTopKPlan(const TopKPlan& plan, absl::Span<const float> sum,
                            float scale, absl::Span<float> residual,
                            std::vector<std::string>* out) {
  if (sum.size() != residual.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("top-k plan: ", sum.size(), " gradient values, ",
                     residual.size(), " residual values"));
  }
  if (absl::Status s = plan.Validate(static_cast<int64_t>(sum.size()));
      !s.ok()) {
    return s;
  }
  return plan_encode_internal::EncodeChunksOrNothing(
      "top-k plan", plan.chunks, sum, scale, residual,
      [](const TopKChunkPlan& p, absl::Span<const float> average,
         absl::Span<float> chunk_residual, std::string* bytes) {
        return EncodeTopK(average, p.k, chunk_residual, bytes);
      },
      out);
}

absl::Status TopKChunkBytes(int64_t count, absl::Span<const uint32_t> indices,
                            absl::Span<const float> values, std::string* out) {
  const int64_t k = static_cast<int64_t>(indices.size());
  if (count < 1 || count > kGradCodecMaxElements ||
      values.size() != indices.size() || k > count) {
    return absl::InvalidArgumentError(
        absl::StrCat("top-k chunk of ", count, " elements: ", indices.size(),
                     " indices and ", values.size(), " values"));
  }
  int64_t previous = -1;
  for (int64_t j = 0; j < k; ++j) {
    if (static_cast<int64_t>(indices[j]) <= previous ||
        indices[j] >= static_cast<uint64_t>(count) ||
        !std::isfinite(values[j])) {
      return absl::InvalidArgumentError(
          absl::StrCat("top-k chunk of ", count, " elements: entry ", j,
                       " (index ", indices[j], ", value ", values[j],
                       ") is not finite or not after the one before"));
    }
    previous = indices[j];
  }
  std::string bytes(kGradCodecHeaderBytes + 8 * k, '\0');
  char* p = bytes.data() + kGradCodecHeaderBytes;
  for (int64_t j = 0; j < k; ++j, p += 4) {
    uint32_t u;
    std::memcpy(&u, &values[j], 4);
    PutU32(u, p);
  }
  char* const index_begin = p;
  previous = -1;
  for (int64_t j = 0; j < k; ++j) {
    uint32_t gap = static_cast<uint32_t>(indices[j] - previous - 1);
    while (gap >= 0x80) {
      *p++ = static_cast<char>((gap & 0x7f) | 0x80);
      gap >>= 7;
    }
    *p++ = static_cast<char>(gap);
    previous = indices[j];
  }
  const int64_t index_bytes = p - index_begin;
  bytes[0] = static_cast<char>(GradEncoding::kTopK);
  bytes[1] = static_cast<char>(kGradCodecVersion);
  PutU32(static_cast<uint32_t>(count), bytes.data() + 4);
  PutU32(static_cast<uint32_t>(k), bytes.data() + 8);
  PutU32(static_cast<uint32_t>(index_bytes), bytes.data() + 12);
  bytes.resize(kGradCodecHeaderBytes + 4 * k + index_bytes);
  *out = std::move(bytes);
  return absl::OkStatus();
}

}  // namespace asgd
