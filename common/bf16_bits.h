// float32 -> bfloat16 rounding on the bits, written once for the host (the
// wire codec, common/wire_codec.h) and the device (the CUDA backend's push
// encoding, model/cuda/cuda_resident.cu): round to nearest, ties to even;
// a finite value that would round up to Inf saturates at the largest finite
// bfloat16 (±3.3895e38); NaN stays a (quiet) NaN. Integer operations only,
// so the host and the device give the same bits.
//
// Branch-free, and the comparisons are on values below 2^31 so they can be
// signed (SSE/AVX have no unsigned 32-bit compare): loops over it vectorize
// into a few instructions per element.
//
// Thread-safety: a pure function.
#ifndef ASGD_COMMON_BF16_BITS_H_
#define ASGD_COMMON_BF16_BITS_H_

#include <cstdint>

#if defined(__CUDACC__)
#define ASGD_BF16_HD __host__ __device__
#else
#define ASGD_BF16_HD
#endif

namespace asgd {

// The bfloat16 of the float32 whose bits are `u`.
ASGD_BF16_HD inline uint16_t Bf16FromFloatBits(uint32_t u) {
  const int32_t abs = static_cast<int32_t>(u & 0x7fffffffu);
  const uint32_t sign = u & 0x80000000u;
  // Rounding the magnitude: at most 0x7fffffff + 0x8000, so keep it 32-bit
  // unsigned; only NaN inputs can carry past the exponent, and those are
  // replaced below.
  const uint32_t rounded_abs =
      (static_cast<uint32_t>(abs) + 0x7fffu + ((u >> 16) & 1u)) >> 16;
  const int32_t r = static_cast<int32_t>(rounded_abs);
  // Finite inputs that rounded up to the Inf pattern saturate.
  const int32_t finite = (r >= 0x7f80 && abs < 0x7f800000) ? 0x7f7f : r;
  const int32_t magnitude =
      abs > 0x7f800000 ? ((abs >> 16) | 0x0040) : finite;  // NaN stays NaN
  return static_cast<uint16_t>((sign >> 16) | static_cast<uint32_t>(magnitude));
}

}  // namespace asgd

#endif  // ASGD_COMMON_BF16_BITS_H_
