// The top-k format: parse, decode and the error-feedback encoder.

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

// Top-k encoder passes 2 and 3 (see EncodeTopK), 8 elements at a time: most
// blocks hold no element of interest and cost a vector compare.

// Writes the |a| bits of every element in histogram bucket `bucket` to out.
ASGD_VECTOR_CLONES void CollectBucket(const float* __restrict g,
                                      const float* __restrict r, int64_t n,
                                      uint32_t bucket,
                                      uint32_t* __restrict out) {
  const uint32_t lo = bucket << kTopKHistogramShift;
  const uint32_t hi_inclusive = lo + ((1u << kTopKHistogramShift) - 1);
  // Keys are below 2^31: signed lane compares are exact.
  typedef int32_t I32x8 __attribute__((vector_size(32)));
  ASGD_SPLAT8(abs_mask, kAbsMask);
  ASGD_SPLAT8(lo_lanes, lo);
  ASGD_SPLAT8(hi_lanes, hi_inclusive);
  const I32x8 vlo = (I32x8)lo_lanes, vhi = (I32x8)hi_lanes;
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    F32x8 gv, rv;
    LoadTo(gv, g + i);
    LoadTo(rv, r + i);
    const U32x8 key = (U32x8)(gv + rv) & abs_mask;
    const I32x8 k = (I32x8)key;
    const U32x8 in_bucket = (U32x8)((k >= vlo) & (k <= vhi));
    if (!AnyLane(in_bucket)) continue;
    for (int j = 0; j < 8; ++j) {
      if (key[j] >= lo && key[j] <= hi_inclusive) *out++ = key[j];
    }
  }
  for (; i < n; ++i) {
    const uint32_t key = Bits(g[i] + r[i]) & kAbsMask;
    if (key >= lo && key <= hi_inclusive) *out++ = key;
  }
}

// Stores a = g + r to r for every element, then, for the selected ones (key
// > threshold, and the first `equal_left` keys == threshold), appends a to
// `values` and its index varint at `index`, and sets r to 0. Returns the end
// of the index bytes.
ASGD_VECTOR_CLONES char* EmitSelected(const float* __restrict g,
                                      float* __restrict r, int64_t n,
                                      uint32_t threshold, int64_t equal_left,
                                      char* __restrict values,
                                      char* __restrict index) {
  typedef int32_t I32x8 __attribute__((vector_size(32)));
  int64_t previous = -1;
  auto take = [&](int64_t i) {
    const uint32_t key = Bits(r[i]) & kAbsMask;
    if (key > threshold || (key == threshold && equal_left > 0)) {
      if (key == threshold) --equal_left;
      std::memcpy(values, &r[i], 4);
      values += 4;
      index = WriteVarint(static_cast<uint32_t>(i - previous - 1), index);
      previous = i;
      r[i] = 0.0f;
    }
  };
  ASGD_SPLAT8(abs_mask, kAbsMask);
  ASGD_SPLAT8(threshold_lanes, threshold);
  const I32x8 vthreshold = (I32x8)threshold_lanes;
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    F32x8 gv, rv;
    LoadTo(gv, g + i);
    LoadTo(rv, r + i);
    const F32x8 a = gv + rv;
    Store(r + i, a);
    const I32x8 key = (I32x8)((U32x8)a & abs_mask);
    const U32x8 above = (U32x8)(key >= vthreshold);
    if (!AnyLane(above)) continue;
    for (int j = 0; j < 8; ++j) take(i + j);
  }
  for (; i < n; ++i) {
    r[i] = g[i] + r[i];
    take(i);
  }
  return index;
}

absl::Status ParseTopK(absl::string_view data, int64_t count, int64_t k,
                       int64_t index_bytes, CompressedChunk* chunk) {
  if (k > count) {
    return Invalid(
        "top-k", absl::StrCat("k = ", k, " exceeds the element count ", count));
  }
  const int64_t want = kGradCodecHeaderBytes + 4 * k + index_bytes;
  if (static_cast<int64_t>(data.size()) != want) {
    return Invalid("top-k",
                   absl::StrCat(data.size(), " bytes, want exactly ", want,
                                " (16 header + 4 x ", k, " values + ",
                                index_bytes, " index bytes)"));
  }
  const char* values = data.data() + kGradCodecHeaderBytes;
  for (int64_t j = 0; j < k; ++j) {
    const float v = Load<float>(values + 4 * j);
    if (!std::isfinite(v)) {
      return Invalid("top-k", absl::StrFormat("value %d is %g", j, v));
    }
  }
  const auto* indices = reinterpret_cast<const uint8_t*>(values + 4 * k);
  int64_t pos = 0;
  int64_t index = -1;
  for (int64_t j = 0; j < k; ++j) {
    uint32_t gap = 0;
    for (int byte = 0;; ++byte) {
      if (pos >= index_bytes) {
        return Invalid("top-k",
                       absl::StrCat("index section of ", index_bytes,
                                    " bytes ends inside entry ", j, " of ", k));
      }
      const uint8_t b = indices[pos++];
      if (byte == 3 && (b & 0x80) != 0) {
        return Invalid("top-k", absl::StrCat("index varint of entry ", j,
                                             " is longer than 4 bytes"));
      }
      if (byte > 0 && b == 0) {
        return Invalid("top-k", absl::StrCat("index varint of entry ", j,
                                             " is not minimal"));
      }
      gap |= static_cast<uint32_t>(b & 0x7f) << (7 * byte);
      if ((b & 0x80) == 0) break;
    }
    index += 1 + static_cast<int64_t>(gap);
    if (index >= count) {
      return Invalid("top-k",
                     absl::StrCat("index ", index, " of entry ", j,
                                  " is out of range (count ", count, ")"));
    }
  }
  if (pos != index_bytes) {
    return Invalid(
        "top-k", absl::StrCat(index_bytes - pos, " bytes after the last of ", k,
                              " indices"));
  }
  chunk->k = k;
  chunk->values = values;
  chunk->indices = indices;
  chunk->index_bytes = index_bytes;
  return absl::OkStatus();
}

void DecodeTopK(const CompressedChunk& c, int64_t begin, int64_t end,
                float* out) {
  std::fill(out, out + (end - begin), 0.0f);
  TopKReader reader(c);
  int64_t index;
  float value;
  while (reader.Next(&index, &value) && index < end) {
    if (index >= begin) out[index - begin] = value;
  }
}


}  // namespace grad_codec_internal

using grad_codec_internal::Bits;
using grad_codec_internal::WriteHeader;
using grad_codec_internal::CheckEncodeSizes;
using grad_codec_internal::NonFinite;
using grad_codec_internal::kAbsMask;
using grad_codec_internal::kInfBits;
using grad_codec_internal::kTopKHistogramShift;
using grad_codec_internal::kTopKBuckets;
using grad_codec_internal::CollectBucket;
using grad_codec_internal::EmitSelected;

int64_t TopKCount(double fraction, int64_t count) {
  if (count <= 0) return 0;
  const double k = std::ceil(fraction * static_cast<double>(count));
  if (!(k >= 1.0)) return 1;
  return k >= static_cast<double>(count) ? count : static_cast<int64_t>(k);
}

absl::Status EncodeTopK(absl::Span<const float> gradient, int64_t k,
                        absl::Span<float> residual, std::string* out) {
  if (absl::Status s = CheckEncodeSizes("top-k", gradient, residual); !s.ok()) {
    return s;
  }
  const int64_t n = gradient.size();
  if (k < 0 || k > n) {
    return absl::InvalidArgumentError(absl::StrCat(
        "top-k encode: k = ", k, " for ", n, " elements, want 0 to ", n));
  }
  const float* g = gradient.data();
  float* r = residual.data();

  // Pass 1: a histogram of |a| by its top 11 bits (exponent and 3 mantissa
  // bits: magnitudes of finite floats order as their bit patterns), and the
  // NaN/Inf check, before anything is written. Four interleaved histograms
  // (32 KiB, in L1) so that runs of equal buckets do not serialise on one
  // counter.
  std::vector<uint32_t> histograms(4 * kTopKBuckets, 0);
  uint32_t* h = histograms.data();
  uint32_t max_bits = 0;
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) {
    for (int j = 0; j < 4; ++j) {
      const uint32_t key = Bits(g[i + j] + r[i + j]) & kAbsMask;
      ++h[j * kTopKBuckets + (key >> kTopKHistogramShift)];
      max_bits = std::max(max_bits, key);
    }
  }
  for (; i < n; ++i) {
    const uint32_t key = Bits(g[i] + r[i]) & kAbsMask;
    ++h[key >> kTopKHistogramShift];
    max_bits = std::max(max_bits, key);
  }
  std::vector<uint32_t> histogram(kTopKBuckets);
  for (int b = 0; b < kTopKBuckets; ++b) {
    histogram[b] = h[b] + h[kTopKBuckets + b] + h[2 * kTopKBuckets + b] +
                   h[3 * kTopKBuckets + b];
  }
  if (max_bits >= kInfBits) return NonFinite("top-k");

  // The k-th largest key T, and how many elements equal to T to take (the
  // lowest indices first): take every key > T and the first `equal_left`
  // keys == T.
  uint32_t threshold = kAbsMask;  // k == 0: nothing is above it
  int64_t equal_left = 0;
  if (k > 0) {
    int64_t above = 0;
    int bucket = kTopKBuckets - 1;
    while (above + histogram[bucket] < k) above += histogram[bucket--];
    const int64_t need = k - above;  // 1 .. histogram[bucket]
    std::vector<uint32_t> candidates(histogram[bucket]);
    CollectBucket(g, r, n, static_cast<uint32_t>(bucket), candidates.data());
    std::nth_element(candidates.begin(), candidates.begin() + (need - 1),
                     candidates.end(), std::greater<uint32_t>());
    threshold = candidates[need - 1];
    const int64_t greater =
        std::count_if(candidates.begin(), candidates.end(),
                      [&](uint32_t key) { return key > threshold; });
    equal_left = need - greater;
  }

  // Pass 3: emit the selected entries in index order; the rest stays in the
  // residual.
  out->resize(kGradCodecHeaderBytes + 8 * k);
  char* const index_begin = out->data() + kGradCodecHeaderBytes + 4 * k;
  const char* index_end =
      EmitSelected(g, r, n, threshold, equal_left,
                   out->data() + kGradCodecHeaderBytes, index_begin);
  const int64_t index_bytes = index_end - index_begin;
  WriteHeader(GradEncoding::kTopK, n, static_cast<uint32_t>(k),
              static_cast<uint32_t>(index_bytes), out->data());
  out->resize(kGradCodecHeaderBytes + 4 * k + index_bytes);
  return absl::OkStatus();
}


}  // namespace asgd
