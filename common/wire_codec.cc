#include "common/wire_codec.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace asgd {
namespace {

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "the wire format is little-endian; add byte swapping");

constexpr uint32_t kExponentMask = 0x7f800000u;  // float32: all ones = NaN/Inf
constexpr int64_t kBlock = 4096;  // elements between early-exit checks

inline uint32_t Bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof(u));
  return u;
}

// Rounds to nearest even; saturates finite overflow; keeps NaN a quiet NaN.
// Branch-free apart from the selects, so loops over it vectorize.
inline uint16_t ToBf16(uint32_t u) {
  const uint32_t abs = u & 0x7fffffffu;
  const uint32_t sign = (u >> 16) & 0x8000u;
  const uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
  // Finite values whose rounding reached the Inf pattern saturate.
  const uint32_t finite = (rounded & 0x7fffu) >= 0x7f80u ? (sign | 0x7f7fu)
                                                          : rounded;
  const uint32_t nan = (u >> 16) | 0x0040u;
  const uint32_t inf = sign | 0x7f80u;
  return static_cast<uint16_t>(abs > kExponentMask   ? nan
                               : abs == kExponentMask ? inf
                                                      : finite);
}

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

uint16_t FloatToBf16(float value) { return ToBf16(Bits(value)); }

float Bf16ToFloat(uint16_t value) {
  const uint32_t u = static_cast<uint32_t>(value) << 16;
  float f;
  std::memcpy(&f, &u, sizeof(f));
  return f;
}

void EncodeFloats(const float* src, int64_t count, WireDtype dtype,
                  char* out) {
  if (dtype == WireDtype::kFloat32) {
    std::memcpy(out, src, count * sizeof(float));
    return;
  }
  for (int64_t i = 0; i < count; ++i) {
    const uint16_t b = ToBf16(Bits(src[i]));
    std::memcpy(out + 2 * i, &b, sizeof(b));
  }
}

int64_t DecodeFloats(const char* src, int64_t count, WireDtype dtype,
                     float* dst, bool check_finite) {
  for (int64_t begin = 0; begin < count; begin += kBlock) {
    const int64_t end = std::min(count, begin + kBlock);
    // The largest exponent field seen in the block: all ones means NaN/Inf.
    uint32_t max_exponent = 0;
    if (dtype == WireDtype::kFloat32) {
      for (int64_t i = begin; i < end; ++i) {
        const uint32_t u = Load<uint32_t>(src + 4 * i);
        std::memcpy(dst + i, &u, sizeof(u));
        max_exponent = std::max(max_exponent, u & kExponentMask);
      }
    } else {
      for (int64_t i = begin; i < end; ++i) {
        const uint32_t u = static_cast<uint32_t>(Load<uint16_t>(src + 2 * i))
                           << 16;
        std::memcpy(dst + i, &u, sizeof(u));
        max_exponent = std::max(max_exponent, u & kExponentMask);
      }
    }
    if (check_finite && max_exponent == kExponentMask) {
      for (int64_t i = begin; i < end; ++i) {
        if (!std::isfinite(dst[i])) return i;
      }
    }
  }
  return -1;
}

}  // namespace asgd
