// The one-bit format: parse, decode and the error-feedback encoder.

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

// ---- one-bit --------------------------------------------------------------

absl::Status ParseOneBit(absl::string_view data, int64_t count,
                         int64_t group_size, int64_t first_group,
                         const CodecLimits& limits, CompressedChunk* chunk) {
  const int64_t max_group = std::min(
      std::max<int64_t>(limits.max_group_size, 1), kGradCodecMaxGroupSize);
  if (group_size < 1 || group_size > max_group) {
    return Invalid("one-bit",
                   absl::StrCat("group size ", group_size, " out of range [1, ",
                                max_group, "]"));
  }
  if (first_group < 1 || first_group > std::min(group_size, count)) {
    return Invalid("one-bit",
                   absl::StrCat("first group of ", first_group,
                                " elements, want 1 to min(group size ",
                                group_size, ", count ", count, ")"));
  }
  const int64_t groups = NumGroups(count, group_size, first_group);
  const int64_t bit_bytes = (count + 7) / 8;
  const int64_t want = kGradCodecHeaderBytes + 8 * groups + bit_bytes;
  if (static_cast<int64_t>(data.size()) != want) {
    return Invalid(
        "one-bit",
        absl::StrCat(data.size(), " bytes, want exactly ", want,
                     " (16 header + 8 x ", groups, " groups + ", bit_bytes,
                     " bytes of bits for ", count, " elements)"));
  }
  const char* levels = data.data() + kGradCodecHeaderBytes;
  for (int64_t g = 0; g < groups; ++g) {
    const float neg = Load<float>(levels + 8 * g);
    const float pos = Load<float>(levels + 8 * g + 4);
    if (!std::isfinite(neg) || !std::isfinite(pos)) {
      return Invalid("one-bit", absl::StrFormat("group %d has a non-finite "
                                                "reconstruction value (%g, %g)",
                                                g, neg, pos));
    }
    if (neg > 0.0f || pos < 0.0f) {
      return Invalid("one-bit",
                     absl::StrFormat("group %d: reconstruction values (%g, "
                                     "%g), want negative part <= 0 <= "
                                     "non-negative part",
                                     g, neg, pos));
    }
  }
  const auto* bits = reinterpret_cast<const uint8_t*>(levels + 8 * groups);
  if (count % 8 != 0 && (bits[bit_bytes - 1] >> (count % 8)) != 0) {
    return Invalid("one-bit",
                   absl::StrCat("unused bits of the last byte are not zero (",
                                count, " elements)"));
  }
  chunk->group_size = group_size;
  chunk->first_group = first_group;
  chunk->num_groups = groups;
  chunk->levels = levels;
  chunk->bits = bits;
  return absl::OkStatus();
}


// out[8 b + j] = bit j of bits[b] ? pos : neg, for b in [0, bytes): one
// broadcast per 32 bits, then per 8 elements a mask test and a blend.
ASGD_VECTOR_CLONES void SelectWholeBytes(const uint8_t* __restrict bits,
                                         int64_t bytes, float neg, float pos,
                                         float* __restrict out) {
  ASGD_SPLAT8(vneg, Bits(neg));
  ASGD_SPLAT8(vpos, Bits(pos));
  const U32x8 flip = vneg ^ vpos;
  int64_t b = 0;
  for (; b + 4 <= bytes; b += 4) {
    ASGD_SPLAT8(word, Load<uint32_t>(bits + b));
#pragma GCC unroll 4
    for (int j = 0; j < 4; ++j) {
      const U32x8 lane = kLaneBits << (8 * j);
      const U32x8 set = (U32x8)((word & lane) == lane);  // -1 or 0
      const U32x8 v = vneg ^ (flip & set);
      Store(out + 8 * (b + j), v);
    }
  }
  for (; b < bytes; ++b) {
    ASGD_SPLAT8(byte, bits[b]);
    const U32x8 set = (U32x8)((byte & kLaneBits) == kLaneBits);
    const U32x8 v = vneg ^ (flip & set);
    Store(out + 8 * b, v);
  }
}

inline bool BitAt(const uint8_t* bits, int64_t i) {
  return (bits[i >> 3] >> (i & 7)) & 1;
}

// Decodes elements [from, to) of one group into out[0, to - from).
void DecodeGroup(const uint8_t* bits, int64_t from, int64_t to, float neg,
                 float pos, float* out) {
  int64_t i = from;
  for (; i < to && (i & 7) != 0; ++i) *out++ = BitAt(bits, i) ? pos : neg;
  const int64_t bytes = (to - i) / 8;
  SelectWholeBytes(bits + i / 8, bytes, neg, pos, out);
  out += 8 * bytes;
  i += 8 * bytes;
  for (; i < to; ++i) *out++ = BitAt(bits, i) ? pos : neg;
}

void DecodeOneBit(const CompressedChunk& c, int64_t begin, int64_t end,
                  float* out) {
  int64_t group = OneBitGroupOf(c, begin);
  int64_t i = begin;
  while (i < end) {
    const int64_t group_end = std::min(end, OneBitGroupBegin(c, group + 1));
    const float neg = Load<float>(c.levels + 8 * group);
    const float pos = Load<float>(c.levels + 8 * group + 4);
    DecodeGroup(c.bits, i, group_end, neg, pos, out + (i - begin));
    i = group_end;
    ++group;
  }
}

// Sums of one group's a = g + r: over the negative and the non-negative
// elements (in double), the number of non-negative ones, and the largest
// |a| bit pattern (>= kInfBits: a NaN or Inf is among them). Eight
// interleaved partial sums so that the loop vectorizes without reordering a
// sum the compiler must keep in order.
struct GroupSums {
  double neg = 0;
  double pos = 0;
  int64_t num_pos = 0;
  uint32_t max_abs_bits = 0;
};

ASGD_VECTOR_CLONES void SumGroup(const float* g, const float* r, int64_t n,
                                 GroupSums* out) {
  // Per lane: a >= 0 goes to pos, a < 0 to neg (a - (a or 0) is exact), in
  // double.
  F64x4 pos_lo{}, pos_hi{}, neg_lo{}, neg_hi{};
  U32x8 num_neg{}, max_bits{};
  int64_t i = 0;
  ASGD_SPLAT8(abs_mask, kAbsMask);
  for (; i + 8 <= n; i += 8) {
    F32x8 gv, rv;
    LoadTo(gv, g + i);
    LoadTo(rv, r + i);
    const F32x8 a = gv + rv;
    const U32x8 a_bits = (U32x8)a;
    const U32x8 negative = (U32x8)(a < F32x8{});  // -1 or 0
    const F32x8 a_pos = (F32x8)(a_bits & ~negative);
    const F32x8 a_neg = a - a_pos;
    pos_lo += __builtin_convertvector(
        __builtin_shufflevector(a_pos, a_pos, 0, 1, 2, 3), F64x4);
    pos_hi += __builtin_convertvector(
        __builtin_shufflevector(a_pos, a_pos, 4, 5, 6, 7), F64x4);
    neg_lo += __builtin_convertvector(
        __builtin_shufflevector(a_neg, a_neg, 0, 1, 2, 3), F64x4);
    neg_hi += __builtin_convertvector(
        __builtin_shufflevector(a_neg, a_neg, 4, 5, 6, 7), F64x4);
    num_neg -= negative;
    const U32x8 abs_bits = a_bits & abs_mask;
    max_bits = max_bits > abs_bits ? max_bits : abs_bits;
  }
  GroupSums s;
  int64_t negatives = 0;
  for (int j = 0; j < 4; ++j) {
    s.pos += pos_lo[j] + pos_hi[j];
    s.neg += neg_lo[j] + neg_hi[j];
  }
  for (int j = 0; j < 8; ++j) {
    negatives += num_neg[j];
    s.max_abs_bits = std::max(s.max_abs_bits, max_bits[j]);
  }
  for (; i < n; ++i) {
    const float a = g[i] + r[i];
    if (a < 0.0f) {
      s.neg += a;
      ++negatives;
    } else {
      s.pos += a;
    }
    s.max_abs_bits = std::max(s.max_abs_bits, Bits(a) & kAbsMask);
  }
  s.num_pos = n - negatives;
  *out = s;
}

// For whole bytes of elements: a = g + r, bit = a >= 0, r = a - level.
ASGD_VECTOR_CLONES void QuantiseWholeBytes(const float* __restrict g,
                                           float* __restrict r, int64_t bytes,
                                           float neg, float pos,
                                           uint8_t* __restrict bits) {
  ASGD_SPLAT8(vneg, Bits(neg));
  ASGD_SPLAT8(vpos, Bits(pos));
  const U32x8 flip = vneg ^ vpos;
  for (int64_t b = 0; b < bytes; ++b) {
    F32x8 gv, rv;
    LoadTo(gv, g + 8 * b);
    LoadTo(rv, r + 8 * b);
    const F32x8 a = gv + rv;
    const U32x8 non_negative = (U32x8)(a >= F32x8{});  // -1 or 0
    const F32x8 level = (F32x8)(vneg ^ (flip & non_negative));
    const F32x8 lost = a - level;
    Store(r + 8 * b, lost);
    const U32x8 lane = non_negative & kLaneBits;
    bits[b] = static_cast<uint8_t>(lane[0] | lane[1] | lane[2] | lane[3] |
                                   lane[4] | lane[5] | lane[6] | lane[7]);
  }
}

inline void QuantiseOne(const float* g, float* r, int64_t i, float neg,
                        float pos, uint8_t* bits) {
  const float a = g[i] + r[i];
  const bool non_negative = a >= 0.0f;
  r[i] = a - (non_negative ? pos : neg);
  bits[i >> 3] |= static_cast<uint8_t>(non_negative) << (i & 7);
}

// Elements [from, to) of one group; `bits` zeroed where partial bytes are
// or-ed in.
void QuantiseGroup(const float* g, float* r, int64_t from, int64_t to,
                   float neg, float pos, uint8_t* bits) {
  int64_t i = from;
  for (; i < to && (i & 7) != 0; ++i) QuantiseOne(g, r, i, neg, pos, bits);
  const int64_t bytes = (to - i) / 8;
  QuantiseWholeBytes(g + i, r + i, bytes, neg, pos, bits + i / 8);
  i += 8 * bytes;
  for (; i < to; ++i) QuantiseOne(g, r, i, neg, pos, bits);
}


}  // namespace grad_codec_internal

using grad_codec_internal::NumGroups;
using grad_codec_internal::WriteHeader;
using grad_codec_internal::CheckEncodeSizes;
using grad_codec_internal::NonFinite;
using grad_codec_internal::kInfBits;
using grad_codec_internal::GroupSums;
using grad_codec_internal::QuantiseGroup;
using grad_codec_internal::SumGroup;

int64_t OneBitEncodedSize(int64_t count, int64_t group_size,
                          int64_t first_group) {
  return kGradCodecHeaderBytes + 8 * NumGroups(count, group_size, first_group) +
         (count + 7) / 8;
}

absl::Status EncodeOneBit(absl::Span<const float> gradient, int64_t group_size,
                          int64_t first_group, absl::Span<float> residual,
                          std::string* out) {
  if (absl::Status s = CheckEncodeSizes("one-bit", gradient, residual);
      !s.ok()) {
    return s;
  }
  const int64_t n = gradient.size();
  if (group_size < 1 || group_size > kGradCodecMaxGroupSize ||
      first_group < 1 || first_group > std::min(group_size, n)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "one-bit encode: groups (size ", group_size, ", first ", first_group,
        ") for ", n, " elements; want 1 <= first <= min(size, count), size <= ",
        kGradCodecMaxGroupSize));
  }
  const float* g = gradient.data();
  float* r = residual.data();
  const int64_t groups = NumGroups(n, group_size, first_group);
  auto group_begin = [&](int64_t k) {
    return k == 0 ? 0 : first_group + (k - 1) * group_size;
  };
  // Pass 1: the reconstruction values of every group, before anything is
  // written, so that a NaN/Inf leaves the residual untouched.
  std::vector<float> levels(2 * groups);
  for (int64_t k = 0; k < groups; ++k) {
    const int64_t from = group_begin(k);
    const int64_t to = std::min(n, group_begin(k + 1));
    GroupSums s;
    SumGroup(g + from, r + from, to - from, &s);
    if (s.max_abs_bits >= kInfBits) return NonFinite("one-bit");
    const int64_t num_neg = (to - from) - s.num_pos;
    levels[2 * k] = num_neg > 0 ? static_cast<float>(s.neg / num_neg) : 0.0f;
    levels[2 * k + 1] =
        s.num_pos > 0 ? static_cast<float>(s.pos / s.num_pos) : 0.0f;
  }
  // Pass 2: bits and residual, group by group.
  out->assign(OneBitEncodedSize(n, group_size, first_group), '\0');
  char* p = out->data();
  WriteHeader(GradEncoding::kOneBit, n, static_cast<uint32_t>(group_size),
              static_cast<uint32_t>(first_group), p);
  std::memcpy(p + kGradCodecHeaderBytes, levels.data(), 8 * groups);
  auto* bits =
      reinterpret_cast<uint8_t*>(p + kGradCodecHeaderBytes + 8 * groups);
  for (int64_t k = 0; k < groups; ++k) {
    QuantiseGroup(g, r, group_begin(k), std::min(n, group_begin(k + 1)),
                  levels[2 * k], levels[2 * k + 1], bits);
  }
  return absl::OkStatus();
}


}  // namespace asgd
