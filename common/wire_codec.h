// Element encodings of tensor chunks on the wire (asgd.v1.WireDtype), and the
// copy kernels between them and float32 memory.
//
// float32 travels as its 4 little-endian bytes. bfloat16 is the upper half of
// a float32 (sign, 8 exponent bits, 7 mantissa bits), 2 little-endian bytes:
// FloatToBf16 rounds to nearest, ties to even; a finite value that would
// round up to Inf saturates at the largest finite bfloat16 (±3.3895e38), so a
// finite gradient never becomes Inf on the wire; NaN stays a (quiet) NaN.
//
// The decode kernel is the receive path's only pass over memory: it copies
// (widening bfloat16) 8 KiB at a time and checks each block for NaN/Inf, and
// takes its largest magnitude, while it is still in L1; the loops vectorize,
// and are also compiled for AVX2 and picked at load time.
//
// Thread-safety: every function is pure (writes only its output arguments).
#ifndef ASGD_COMMON_WIRE_CODEC_H_
#define ASGD_COMMON_WIRE_CODEC_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace asgd {

// Values match asgd.v1.WireDtype.
enum class WireDtype : int {
  kFloat32 = 0,
  kBfloat16 = 1,
};

// Bytes per element.
inline int WireBytes(WireDtype dtype) {
  return dtype == WireDtype::kBfloat16 ? 2 : 4;
}

// "fp32" or "bf16".
absl::string_view WireDtypeName(WireDtype dtype);

// Accepts "fp32"/"float32" and "bf16"/"bfloat16"; InvalidArgument otherwise.
absl::StatusOr<WireDtype> ParseWireDtype(absl::string_view text);

// True when `value` is a WireDtype this build knows.
bool IsKnownWireDtype(int value);

// How a gradient push travels: every value of asgd.v1.WireDtype, i.e. the
// float encodings above plus the compressed gradient encodings that only
// pushes use (their bytes: compression/grad_codec.h). Values match the proto.
enum class PushEncoding : int {
  kFloat32 = 0,
  kBfloat16 = 1,
  kOneBit = 2,
  kTopK = 3,
};
inline constexpr int kNumPushEncodings = 4;

// "fp32", "bf16", "onebit", "topk": also the metric label.
absl::string_view PushEncodingName(PushEncoding encoding);
// Accepts the names above (and "float32", "bfloat16", "1bit", "top_k");
// InvalidArgument otherwise.
absl::StatusOr<PushEncoding> ParsePushEncoding(absl::string_view text);
// True when `value` (an asgd.v1.WireDtype as sent) is a compressed encoding.
inline bool IsCompressedWireDtype(int value) {
  return value == static_cast<int>(PushEncoding::kOneBit) ||
         value == static_cast<int>(PushEncoding::kTopK);
}
inline bool IsCompressed(PushEncoding encoding) {
  return IsCompressedWireDtype(static_cast<int>(encoding));
}

// A pruned model's mask on the wire (asgd.v1.WireDtype PRUNE_MASK, sent
// only with a delta pull's exact weights): n flags (0: pruned, else
// trained) as PruneMaskBytes(n) bytes, flag i in bit i % 8 (least
// significant first) of byte i / 8, the bits past n 0.
inline constexpr int kPruneMaskWireDtype = 4;
inline int64_t PruneMaskBytes(int64_t n) { return (n + 7) / 8; }
// Writes the n flags of `keep` to `out` (PruneMaskBytes(n) bytes).
void PackPruneMask(const uint8_t* keep, int64_t n, char* out);
// Reads n flags (as 0 or 1) into `keep`; false (keep partly written) unless
// `bytes` is exactly PruneMaskBytes(n) bytes with the bits past n 0.
bool UnpackPruneMask(absl::string_view bytes, int64_t n, uint8_t* keep);

uint16_t FloatToBf16(float value);
float Bf16ToFloat(uint16_t value);

// Writes `count` elements of `src` as `dtype` to `out`, which must have room
// for count * WireBytes(dtype) bytes (no alignment needed).
void EncodeFloats(const float* src, int64_t count, WireDtype dtype,
                  char* out);

// Reads `count` elements of `dtype` from `src` (count * WireBytes(dtype)
// bytes, no alignment needed) into `dst` as float32. With `check_finite`,
// returns the index of the first NaN or Inf (dst may then be partly
// written), else -1. Without it, always -1. When `max_abs` is set and the
// values are finite, raises *max_abs to the largest |value| decoded (the
// same pass over each block as the check: nearly free).
int64_t DecodeFloats(const char* src, int64_t count, WireDtype dtype,
                     float* dst, bool check_finite, float* max_abs = nullptr);

// The largest |x[i]| of n floats (+Inf or NaN's magnitude if any is not
// finite; 0 for n == 0). Vectorized.
float MaxAbs(const float* x, int64_t n);

}  // namespace asgd

#endif  // ASGD_COMMON_WIRE_CODEC_H_
