// Kaldi's compressed matrices (tokens "CM", "CM2", "CM3"): decoding, and
// encoding with Kaldi's own quantisation (CompressedMatrix::CopyFromMat), so
// that archives written here read in Kaldi exactly as Kaldi's own.
//
// Layout after the token (little-endian, no size bytes):
//   float min, float range, int32 rows, int32 cols          (16 bytes)
//   CM : cols × {uint16 p0, p25, p75, p100}, each min + range·u/65535;
//        then rows×cols bytes, column by column. A byte v decodes to
//          v <= 64:  p0  + (p25 − p0)  · v / 64
//          v <= 192: p25 + (p75 − p25) · (v − 64) / 128
//          else:     p75 + (p100 − p75)· (v − 192) / 63
//   CM2: rows×cols uint16 q, row-major: min + range·q/65535
//   CM3: rows×cols uint8 q, row-major:  min + range·q/255
//
// Precision of the encoder (all relative to the matrix's range
// max − min): CM2 within range/131070 + float rounding, CM3 within
// range/510; CM per column within half a step of its piecewise-linear
// grid: (p25−p0)/128, (p75−p25)/256 or (p100−p75)/126.
//
// Thread-safety: the functions are reentrant.
#ifndef ASGD_KALDI_COMPRESSED_MATRIX_H_
#define ASGD_KALDI_COMPRESSED_MATRIX_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace asgd::kaldi {

enum class CompressedFormat {
  kOneByteWithColHeaders,  // "CM"
  kTwoByte,                // "CM2"
  kOneByte,                // "CM3"
};

// "CM", "CM2", "CM3".
absl::string_view CompressedToken(CompressedFormat format);

struct CompressedHeader {
  float min_value = 0;
  float range = 0;
  int32_t rows = 0;
  int32_t cols = 0;
};
inline constexpr size_t kCompressedHeaderBytes = 16;

// Bytes that follow the 16-byte header for `format` (rows, cols >= 0).
int64_t CompressedPayloadBytes(CompressedFormat format, int64_t rows,
                               int64_t cols);

// Decodes `payload` (exactly CompressedPayloadBytes bytes) into `out`
// (rows×cols floats, row-major).
void DecodeCompressed(CompressedFormat format, const CompressedHeader& header,
                      const unsigned char* payload, float* out);

// How Kaldi chooses a format (copy-feats --compress=true uses kAuto).
enum class CompressionMethod {
  kAuto,           // CM when rows > 8, else CM2 (Kaldi's kAutomaticMethod)
  kSpeechFeature,  // CM
  kTwoByte,        // CM2
  kOneByte,        // CM3
};

// Appends the token with its space, the header and the payload of
// `data` (rows×cols floats, row-major) compressed with `method` to `out`.
// InvalidArgument for NaN or Inf values, which Kaldi cannot compress.
absl::Status EncodeCompressed(const float* data, int32_t rows, int32_t cols,
                              CompressionMethod method, std::string* out);

}  // namespace asgd::kaldi

#endif  // ASGD_KALDI_COMPRESSED_MATRIX_H_
