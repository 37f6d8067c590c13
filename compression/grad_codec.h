// Compressed gradient chunks: 1-bit quantisation and top-k sparsification,
// both with error feedback, and their byte format.
//
// A worker pushes each server its contiguous range of the flat model (see
// common/model_layout.h) in chunks of consecutive elements; a chunk may start
// and end anywhere inside a tensor. A compressed chunk encodes `count`
// consecutive gradient elements and is self-describing: a decoder needs no
// tensor shape, only the bytes (and the caller's limits).
//
// Error feedback (Seide et al., "1-Bit Stochastic Gradient Descent and its
// Application to Data-Parallel Distributed Training of Speech DNNs",
// Interspeech 2014): the encoder keeps a residual per element. Each encode
// first adds the residual to the gradient, a = g + r, encodes a, and keeps
// what the encoding lost, r = a - decoded(a). Over many steps the decoded
// gradients sum to the true gradients minus the current residual, which stays
// bounded, so no part of the gradient is lost, only delayed.
//
// 1-bit. Elements are cut into quantisation groups; each group sends two
// reconstruction values, the mean of its negative elements and the mean of
// its non-negative elements (0 when the part is empty), and one bit per
// element that says which of the two it decodes to. The means minimise the
// squared error of a sign quantiser. Seide et al. keep two values per column
// of each gradient matrix. Here a group is a run of the tensor's contiguous
// last dimension instead: GradEncoder (grad_encoder.h) makes it a row of the
// [out, in] row-major weight tensor, the `in` weights into one output unit
// (a column of the transposed [in, out] matrix), and a bias vector is one
// group. Contiguity is what lets a decoder that sees only a slice of the flat
// vector work without shapes: a slice cut anywhere cuts at most its first and
// last group, and the chunk states where its first group ends (F) and the
// group size (G). Per-row statistics serve the same purpose as per-column
// ones (two values fitted to a set of gradients of similar scale); which one
// quantises better for a given model has not been measured here.
//
// Top-k. The k elements of a with the largest magnitudes (ties: the lower
// index first) travel as exact float32 values with delta-coded indices; every
// other element decodes to 0 (and stays in the residual).
//
// Byte format, version 1. All integers and floats little-endian, no
// alignment assumed. Header, 16 bytes:
//
//   offset  size  field
//   0       1     encoding: 1 = one-bit, 2 = top-k (GradEncoding)
//   1       1     format version: 1
//   2       2     flags: 0 (reserved; anything else is refused)
//   4       4     count: elements the chunk covers, 1 .. max_elements
//   8       4     one-bit: group size G, 1 .. max_group_size
//                 top-k:   k, 0 .. count
//   12      4     one-bit: F, elements in the first group, 1 .. min(G, count)
//                 top-k:   L, the bytes of the index section
//
// One-bit body. Groups: elements [0, F), then [F, F + G), [F + G, F + 2G),
// ..., the last one possibly shorter: N = 1 + ceil((count - F) / G) groups.
//   16        8 N              per group: negative-part value (finite, <= 0),
//                              non-negative-part value (finite, >= 0), float32
//   16 + 8 N  ceil(count / 8)  bit i (byte i / 8, bit i % 8, LSB first) set:
//                              element i decodes to its group's non-negative
//                              value, clear: to the negative one. The unused
//                              high bits of the last byte are 0.
// Size: exactly 16 + 8 N + ceil(count / 8) bytes (about count / 8 + count / G
// * 8 bytes: 1.03 bits per element with G = 2048).
//
// Top-k body.
//   16       4 k  the k values, float32, finite, in increasing index order
//   16 + 4k  L    the k indices, strictly increasing, each < count, as LEB128
//                 varints (7 bits per byte, low bits first, high bit set on all
//                 but the last byte, minimal length, at most 4 bytes): the
//                 first index, then for each next one (index - previous - 1).
// Size: exactly 16 + 4 k + L bytes.
//
// Any other input (truncated, trailing bytes, counts that do not add up,
// non-finite or wrongly signed values, an index varint that is overlong,
// truncated or reaches past count, unknown encoding/version/flags, limits
// exceeded) is refused by ParseCompressedChunk with InvalidArgument and a
// message that names the field; nothing is written.
//
// Thread-safety: every function is pure; the caller owns every buffer.
#ifndef ASGD_COMPRESSION_GRAD_CODEC_H_
#define ASGD_COMPRESSION_GRAD_CODEC_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace asgd {

enum class GradEncoding : uint8_t {
  kOneBit = 1,
  kTopK = 2,
};

// "onebit" or "topk".
absl::string_view GradEncodingName(GradEncoding encoding);

inline constexpr int kGradCodecVersion = 1;
inline constexpr int64_t kGradCodecHeaderBytes = 16;
// Hard caps of the format, whatever the caller's limits: count < 2^28 keeps
// every index varint within 4 bytes.
inline constexpr int64_t kGradCodecMaxElements = (int64_t{1} << 28) - 1;
inline constexpr int64_t kGradCodecMaxGroupSize = int64_t{1} << 24;

// What a decoder accepts (clamped to the format's caps).
struct CodecLimits {
  int64_t max_elements = 256 * 1024;  // elements per chunk
  int64_t max_group_size = 65536;     // one-bit group size G
};

// A validated compressed chunk: views into the bytes it was parsed from,
// which must outlive it. Only ParseCompressedChunk makes one; every function
// below that takes one relies on its invariants and cannot fail.
struct CompressedChunk {
  GradEncoding encoding = GradEncoding::kOneBit;
  int64_t count = 0;
  // kOneBit.
  int64_t group_size = 0;         // G
  int64_t first_group = 0;        // F
  int64_t num_groups = 0;         // N
  const char* levels = nullptr;   // 2 N float32: (negative, non-negative)
  const uint8_t* bits = nullptr;  // ceil(count / 8) bytes
  // kTopK.
  int64_t k = 0;
  const char* values = nullptr;      // k float32
  const uint8_t* indices = nullptr;  // index_bytes of varints
  int64_t index_bytes = 0;
};

// Checks every field of `data` (see the file comment) and returns a view of
// it. InvalidArgument, naming the offending field, for anything malformed.
absl::StatusOr<CompressedChunk> ParseCompressedChunk(absl::string_view data,
                                                     const CodecLimits& limits);

// Writes decoded elements [begin, end) of `chunk` to out[0, end - begin).
// 0 <= begin <= end <= chunk.count. One-bit: O(end - begin); top-k: O(k).
void DecodeCompressed(const CompressedChunk& chunk, int64_t begin, int64_t end,
                      float* out);

// ParseCompressedChunk, then decodes every element into `out`, which must
// hold exactly the chunk's count (else InvalidArgument). Nothing is written
// on error.
absl::Status DecodeCompressedChunk(absl::string_view data,
                                   const CodecLimits& limits,
                                   absl::Span<float> out);

// The 1-bit group index of element i of a one-bit chunk, and its bounds.
inline int64_t OneBitGroupOf(const CompressedChunk& c, int64_t i) {
  return i < c.first_group ? 0 : 1 + (i - c.first_group) / c.group_size;
}
inline int64_t OneBitGroupBegin(const CompressedChunk& c, int64_t group) {
  return group == 0 ? 0 : c.first_group + (group - 1) * c.group_size;
}

// Reads the (index, value) entries of a top-k chunk in index order.
class TopKReader {
 public:
  explicit TopKReader(const CompressedChunk& chunk)
      : values_(chunk.values), p_(chunk.indices), left_(chunk.k) {}
  // False when every entry has been read.
  bool Next(int64_t* index, float* value);

 private:
  const char* values_;
  const uint8_t* p_;
  int64_t left_;
  int64_t index_ = -1;
};

// Encoders. Both add residual[i] to gradient[i], encode the sum a, and store
// a - decoded(a) back into residual[i] (error feedback). `out` is replaced by
// the chunk's bytes. InvalidArgument, with nothing written (neither `out` nor
// the residual), when the sizes disagree, a parameter is out of range, or a
// gradient + residual element is NaN or Inf.

// The bytes of a one-bit chunk of `count` elements with groups (G, F).
int64_t OneBitEncodedSize(int64_t count, int64_t group_size,
                          int64_t first_group);

// 1-bit with groups (group_size G, first_group F) as in the format.
// Reconstruction values are the group means computed in double and rounded to
// float32 once.
absl::Status EncodeOneBit(absl::Span<const float> gradient, int64_t group_size,
                          int64_t first_group, absl::Span<float> residual,
                          std::string* out);

// Top-k with 0 <= k <= gradient.size().
absl::Status EncodeTopK(absl::Span<const float> gradient, int64_t k,
                        absl::Span<float> residual, std::string* out);

// k for a fraction in (0, 1] of `count` elements: ceil(fraction * count),
// at least 1, at most count.
int64_t TopKCount(double fraction, int64_t count);

}  // namespace asgd

#endif  // ASGD_COMPRESSION_GRAD_CODEC_H_
