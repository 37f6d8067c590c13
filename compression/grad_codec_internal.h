// Internals shared by the codec's files (grad_codec.cc: the common header
// and dispatch; grad_codec_one_bit.cc; grad_codec_top_k.cc): byte helpers,
// the vector types of the hot loops, and each format's parse and decode.
// Not part of the library's interface.
//
// Thread-safety: pure functions.
#ifndef ASGD_COMPRESSION_GRAD_CODEC_INTERNAL_H_
#define ASGD_COMPRESSION_GRAD_CODEC_INTERNAL_H_

#include <cstdint>
#include <cstring>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "compression/grad_codec.h"

namespace asgd {
namespace grad_codec_internal {

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

inline int64_t NumGroups(int64_t count, int64_t group_size, int64_t first_group) {
  return 1 + (count - first_group + group_size - 1) / group_size;
}

inline void WriteHeader(GradEncoding encoding, int64_t count, uint32_t a, uint32_t b,
                 char* out) {
  out[0] = static_cast<char>(encoding);
  out[1] = static_cast<char>(kGradCodecVersion);
  Store<uint16_t>(out + 2, 0);
  Store<uint32_t>(out + 4, static_cast<uint32_t>(count));
  Store<uint32_t>(out + 8, a);
  Store<uint32_t>(out + 12, b);
}

inline absl::Status Invalid(absl::string_view what, const std::string& message) {
  return absl::InvalidArgumentError(absl::StrCat(what, " chunk: ", message));
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

// One-bit (grad_codec_one_bit.cc) and top-k (grad_codec_top_k.cc): parse a
// chunk of `count` elements whose header words are `a` and `b`, and decode
// elements [begin, end) of a parsed one into out[0, end - begin).
absl::Status ParseOneBit(absl::string_view data, int64_t count, int64_t a,
                         int64_t b, const CodecLimits& limits,
                         CompressedChunk* chunk);
void DecodeOneBit(const CompressedChunk& c, int64_t begin, int64_t end,
                  float* out);
absl::Status ParseTopK(absl::string_view data, int64_t count, int64_t k,
                       int64_t index_bytes, CompressedChunk* chunk);
void DecodeTopK(const CompressedChunk& c, int64_t begin, int64_t end,
                float* out);

// InvalidArgument unless the gradient holds 1 to kGradCodecMaxElements
// elements and the residual as many.
absl::Status CheckEncodeSizes(absl::string_view what,
                              absl::Span<const float> gradient,
                              absl::Span<float> residual);
// The InvalidArgument of an encode that met NaN or Inf.
absl::Status NonFinite(absl::string_view what);

}  // namespace grad_codec_internal
}  // namespace asgd

#endif  // ASGD_COMPRESSION_GRAD_CODEC_INTERNAL_H_
