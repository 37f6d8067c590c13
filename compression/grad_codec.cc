#include "compression/grad_codec.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace asgd {
namespace {

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "the compressed formats are little-endian; add byte swapping");

// The loops below are compiled for AVX2 as well as the baseline; the loader
// picks the best one for the CPU (GCC function multi-versioning). Their
// arithmetic is plain IEEE float adds and subtractions and double sums in a
// fixed lane order, never contracted to FMA (neither target has it): both
// versions give identical results.
#define ASGD_VECTOR_CLONES __attribute__((target_clones("avx2", "default")))

constexpr uint32_t kAbsMask = 0x7fffffffu;
constexpr uint32_t kInfBits = 0x7f800000u;  // |x| bits >= this: NaN or Inf
constexpr int kTopKHistogramShift = 20;     // 11-bit buckets of |x| bits
constexpr int kTopKBuckets = (kAbsMask >> kTopKHistogramShift) + 1;

inline uint32_t Bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof(u));
  return u;
}

template <typename T>
inline T Load(const void* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

// Vectors are passed by reference: by value, a 32-byte vector crosses from
// an AVX2 clone into a function compiled without AVX, which changes the ABI
// (and Clang refuses it).
template <typename T>
inline void Store(void* p, const T& v) {
  std::memcpy(p, &v, sizeof(T));
}

template <typename T>
inline void LoadTo(T& v, const void* p) {
  std::memcpy(&v, p, sizeof(T));
}

int64_t NumGroups(int64_t count, int64_t group_size, int64_t first_group) {
  return 1 + (count - first_group + group_size - 1) / group_size;
}

void WriteHeader(GradEncoding encoding, int64_t count, uint32_t a, uint32_t b,
                 char* out) {
  out[0] = static_cast<char>(encoding);
  out[1] = static_cast<char>(kGradCodecVersion);
  Store<uint16_t>(out + 2, 0);
  Store<uint32_t>(out + 4, static_cast<uint32_t>(count));
  Store<uint32_t>(out + 8, a);
  Store<uint32_t>(out + 12, b);
}

absl::Status Invalid(absl::string_view what, const std::string& message) {
  return absl::InvalidArgumentError(absl::StrCat(what, " chunk: ", message));
}

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

// Eight 32-bit lanes (GCC/Clang vector extensions: two SSE registers in the
// baseline build, one AVX2 register in the AVX2 clone).
typedef uint32_t U32x8 __attribute__((vector_size(32)));
typedef float F32x8 __attribute__((vector_size(32)));
typedef double F64x4 __attribute__((vector_size(32)));
constexpr U32x8 kLaneBits = {1, 2, 4, 8, 16, 32, 64, 128};

// Whether any lane of a mask (-1 or 0 per lane) is set.
inline bool AnyLane(const U32x8& mask) {
  U32x8 m = mask;
  m |= __builtin_shufflevector(m, m, 4, 5, 6, 7, 0, 1, 2, 3);
  m |= __builtin_shufflevector(m, m, 2, 3, 0, 1, 6, 7, 4, 5);
  m |= __builtin_shufflevector(m, m, 1, 0, 3, 2, 5, 4, 7, 6);
  return m[0] != 0;
}

// Broadcasts a 32-bit value to eight lanes, written out where it is used (a
// function returning the vector would cross the AVX ABI boundary; this form
// compiles to one broadcast instruction).
#define ASGD_SPLAT8(out, value) \
  U32x8 out##_one{};            \
  out##_one[0] = (value);       \
  const U32x8 out =             \
      __builtin_shufflevector(out##_one, out##_one, 0, 0, 0, 0, 0, 0, 0, 0)

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

// ---- top-k ----------------------------------------------------------------

// Reads one index varint at p (validated input only).
inline uint32_t ReadVarint(const uint8_t*& p) {
  uint32_t v = 0;
  int shift = 0;
  for (;;) {
    const uint8_t b = *p++;
    v |= static_cast<uint32_t>(b & 0x7f) << shift;
    if ((b & 0x80) == 0) return v;
    shift += 7;
  }
}

inline char* WriteVarint(uint32_t v, char* p) {
  while (v >= 0x80) {
    *p++ = static_cast<char>((v & 0x7f) | 0x80);
    v >>= 7;
  }
  *p++ = static_cast<char>(v);
  return p;
}

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

}  // namespace

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
