#include "common/wire_codec.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/bf16_bits.h"

namespace asgd {
namespace {

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "the wire format is little-endian; add byte swapping");

constexpr uint32_t kExponentMask = 0x7f800000u;  // float32: all ones = NaN/Inf
constexpr int64_t kBlock = 2048;  // elements per copy-then-check block (8 KiB)

inline uint32_t Bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof(u));
  return u;
}

// The rounding of common/bf16_bits.h (shared with the device).
inline uint16_t ToBf16(uint32_t u) { return Bf16FromFloatBits(u); }

template <typename T>
inline T Load(const char* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

}  // namespace

absl::string_view WireDtypeName(WireDtype dtype) {
  return dtype == WireDtype::kBfloat16 ? "bf16" : "fp32";
}

absl::StatusOr<WireDtype> ParseWireDtype(absl::string_view text) {
  if (text == "fp32" || text == "float32") return WireDtype::kFloat32;
  if (text == "bf16" || text == "bfloat16") return WireDtype::kBfloat16;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown wire dtype '", text, "' (want fp32 or bf16)"));
}

bool IsKnownWireDtype(int value) {
  return value == static_cast<int>(WireDtype::kFloat32) ||
         value == static_cast<int>(WireDtype::kBfloat16);
}

void PackPruneMask(const uint8_t* keep, int64_t n, char* out) {
  for (int64_t byte = 0; byte < PruneMaskBytes(n); ++byte) {
    unsigned bits = 0;
    const int64_t first = byte * 8;
    const int64_t last = first + 8 < n ? first + 8 : n;
    for (int64_t i = first; i < last; ++i) {
      bits |= (keep[i] != 0 ? 1u : 0u) << (i - first);
    }
    out[byte] = static_cast<char>(bits);
  }
}

bool UnpackPruneMask(absl::string_view bytes, int64_t n, uint8_t* keep) {
  if (static_cast<int64_t>(bytes.size()) != PruneMaskBytes(n)) return false;
  for (int64_t i = 0; i < n; ++i) {
    keep[i] = (static_cast<unsigned char>(bytes[i / 8]) >> (i % 8)) & 1u;
  }
  const int tail = static_cast<int>(n % 8);
  return tail == 0 || (static_cast<unsigned char>(bytes.back()) >> tail) == 0;
}

absl::string_view PushEncodingName(PushEncoding encoding) {
  switch (encoding) {
    case PushEncoding::kFloat32: return "fp32";
    case PushEncoding::kBfloat16: return "bf16";
    case PushEncoding::kOneBit: return "onebit";
    case PushEncoding::kTopK: return "topk";
  }
  return "unknown";
}

absl::StatusOr<PushEncoding> ParsePushEncoding(absl::string_view text) {
  if (text == "fp32" || text == "float32") return PushEncoding::kFloat32;
  if (text == "bf16" || text == "bfloat16") return PushEncoding::kBfloat16;
  if (text == "onebit" || text == "1bit") return PushEncoding::kOneBit;
  if (text == "topk" || text == "top_k") return PushEncoding::kTopK;
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown push encoding '", text, "' (want fp32, bf16, onebit or topk)"));
}

uint16_t FloatToBf16(float value) { return ToBf16(Bits(value)); }

float Bf16ToFloat(uint16_t value) {
  const uint32_t u = static_cast<uint32_t>(value) << 16;
  float f;
  std::memcpy(&f, &u, sizeof(f));
  return f;
}

// The loops below are compiled for AVX2 as well as the baseline; the loader
// picks the best one for the CPU (GCC function multi-versioning).
#define ASGD_VECTOR_CLONES __attribute__((target_clones("avx2", "default")))

namespace {

// Plain rounding to nearest even, correct for every magnitude below
// 0x7f7f8000 (the first that rounds up to Inf); returns whether a block held
// a larger one (Inf, NaN, or a finite value that must saturate), in which
// case the caller redoes it with ToBf16.
ASGD_VECTOR_CLONES bool EncodeBf16Fast(const float* src, int64_t count,
                                       char* out) {
  int32_t special = 0;
  for (int64_t i = 0; i < count; ++i) {
    const uint32_t u = Bits(src[i]);
    const uint16_t b =
        static_cast<uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
    std::memcpy(out + 2 * i, &b, sizeof(b));
    special |= static_cast<int32_t>(u & 0x7fffffffu) >= 0x7f7f8000;
  }
  return special != 0;
}

void EncodeBf16(const float* src, int64_t count, char* out) {
  for (int64_t begin = 0; begin < count; begin += kBlock) {
    const int64_t n = std::min(count - begin, kBlock);
    if (!EncodeBf16Fast(src + begin, n, out + 2 * begin)) continue;
    for (int64_t i = begin; i < begin + n; ++i) {
      const uint16_t b = ToBf16(Bits(src[i]));
      std::memcpy(out + 2 * i, &b, sizeof(b));
    }
  }
}

ASGD_VECTOR_CLONES void DecodeBf16(const char* src, int64_t count,
                                   float* dst) {
  for (int64_t i = 0; i < count; ++i) {
    const uint32_t u = static_cast<uint32_t>(Load<uint16_t>(src + 2 * i))
                       << 16;
    std::memcpy(dst + i, &u, sizeof(u));
  }
}

// The largest magnitude of `count` floats as bits (sign cleared): for
// non-negative floats the bit patterns order like the values, so this is an
// integer max that vectorizes. kExponentMask or more means a NaN or Inf is
// among them.
ASGD_VECTOR_CLONES uint32_t MaxAbsBits(const float* values, int64_t count) {
  uint32_t max_bits = 0;
  for (int64_t i = 0; i < count; ++i) {
    max_bits = std::max(max_bits, Bits(values[i]) & 0x7fffffffu);
  }
  return max_bits;
}

inline float FromBits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof(f));
  return f;
}

}  // namespace

void EncodeFloats(const float* src, int64_t count, WireDtype dtype,
                  char* out) {
  if (dtype == WireDtype::kFloat32) {
    std::memcpy(out, src, count * sizeof(float));
  } else {
    EncodeBf16(src, count, out);
  }
}

int64_t DecodeFloats(const char* src, int64_t count, WireDtype dtype,
                     float* dst, bool check_finite, float* max_abs) {
  // Block by block: the copy (glibc's memcpy, or the widening loop), then
  // the check and the maximum over the block while it is still in L1.
  const bool scan = check_finite || max_abs != nullptr;
  uint32_t max_bits = 0;
  for (int64_t begin = 0; begin < count; begin += kBlock) {
    const int64_t n = std::min(count - begin, kBlock);
    if (dtype == WireDtype::kFloat32) {
      std::memcpy(dst + begin, src + 4 * begin, n * sizeof(float));
    } else {
      DecodeBf16(src + 2 * begin, n, dst + begin);
    }
    if (!scan) continue;
    const uint32_t block_bits = MaxAbsBits(dst + begin, n);
    if (check_finite && block_bits >= kExponentMask) {
      for (int64_t i = begin; i < begin + n; ++i) {
        if (!std::isfinite(dst[i])) return i;
      }
    }
    max_bits = std::max(max_bits, block_bits);
  }
  if (max_abs != nullptr) *max_abs = std::max(*max_abs, FromBits(max_bits));
  return -1;
}

float MaxAbs(const float* x, int64_t n) {
  uint32_t max_bits = 0;
  for (int64_t begin = 0; begin < n; begin += kBlock) {
    max_bits =
        std::max(max_bits, MaxAbsBits(x + begin, std::min(n - begin, kBlock)));
  }
  return FromBits(max_bits);
}

}  // namespace asgd
