// GradEncoder: a worker's compressing encoder for one server's range of the
// model, holding the error-feedback residual of that range.
//
// The worker pushes server s the flat range layout.ServerRange(s) in chunks
// (common/chunking.h PlanChunks). For each chunk, EncodeChunk adds the
// residual the encoder kept for those elements to the gradient, encodes the
// sum (grad_codec.h) and keeps what the encoding lost. The residual starts at
// zero and never leaves the worker.
//
// One-bit groups follow the tensor's rows: the group size G is the tensor's
// last dimension (a row of an [out, in] weight matrix, a whole bias vector),
// or max_group_size when that is smaller, and groups are aligned to multiples
// of G inside the tensor. A chunk that starts inside a row begins with the
// rest of that row (F = G - offset % G elements, at most the chunk's count).
// Top-k keeps ceil(top_k_fraction * count) elements of each chunk.
//
// Example:
//   auto enc = GradEncoder::Create(layout, layout.ServerRange(s), options);
//   for (const ChunkRef& c : PlanChunks(layout, range, max_elements))
//     RETURN_IF_ERROR(enc->EncodeChunk(c, grad + c.flat_begin - range.begin,
//                                      &bytes));  // send `bytes`
//
// A push that is not applied (dropped as stale, refused as busy, a broken
// stream) would lose what its chunks carried: the residual already moved on.
// Either resend the same bytes, or hand them back with Restore(), which adds
// their decoded values to the residual, so the next push carries them.
//
// The residual's memory (the range's size in floats) is allocated by the
// first EncodeChunk or Restore: an encoder that is never used (a worker
// whose backend keeps its own residual, model/backend.h) holds none.
//
// Thread-safety: once a first EncodeChunk or Restore has returned,
// EncodeChunk calls on disjoint chunks may run concurrently (each touches
// only its chunk's residual); anything else needs external synchronisation.
#ifndef ASGD_COMPRESSION_GRAD_ENCODER_H_
#define ASGD_COMPRESSION_GRAD_ENCODER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "common/chunking.h"
#include "common/model_layout.h"
#include "compression/grad_codec.h"

namespace asgd {

struct GradEncoderOptions {
  GradEncoding encoding = GradEncoding::kOneBit;
  double top_k_fraction = 0.01;   // top-k: the share of elements sent, (0, 1]
  int64_t max_group_size = 4096;  // one-bit: cap on the group size
};

// Quantisation groups of a one-bit chunk (see the format in grad_codec.h).
struct OneBitGroups {
  int64_t group_size = 0;   // G
  int64_t first_group = 0;  // F
};

class GradEncoder {
 public:
  // InvalidArgument for a range outside the layout, a fraction outside
  // (0, 1], or max_group_size outside [1, kGradCodecMaxGroupSize].
  static absl::StatusOr<GradEncoder> Create(const ModelLayout& layout,
                                            FlatRange range,
                                            const GradEncoderOptions& options);

  // Encodes the chunk.count gradient values at `gradient` (the elements of
  // `chunk`, which must lie inside the range and one tensor) into `out`.
  // InvalidArgument, with nothing changed, for a chunk outside the range or
  // NaN/Inf in gradient + residual.
  absl::Status EncodeChunk(const ChunkRef& chunk, const float* gradient,
                           std::string* out);

  // Adds the decoded values of `bytes`, an encoding of `chunk` returned by
  // EncodeChunk that will not be applied, back to the residual: as if that
  // gradient had never been sent (up to float rounding). InvalidArgument,
  // with nothing changed, when `bytes` is not a valid chunk of chunk.count
  // elements or `chunk` is not inside the range.
  absl::Status Restore(const ChunkRef& chunk, absl::string_view bytes);

  // The one-bit groups EncodeChunk uses for `chunk`.
  OneBitGroups GroupsOf(const ChunkRef& chunk) const;

  // The residual of the whole range (range().size() floats), or empty (all
  // zeros) before the first EncodeChunk or Restore.
  absl::Span<const float> residual() const { return residual_; }
  void ResetResidual();

  FlatRange range() const { return range_; }
  const GradEncoderOptions& options() const { return options_; }

 private:
  GradEncoder(FlatRange range, const GradEncoderOptions& options)
      : range_(range), options_(options) {}
  // The residual's memory, allocated (zeros) on first use.
  float* Residual();

  // InvalidArgument unless `chunk` lies inside one tensor and the range.
  absl::Status CheckChunk(const ChunkRef& chunk) const;

  FlatRange range_;
  GradEncoderOptions options_;
  std::vector<float> residual_;  // empty until first used
  // Per tensor of the layout.
  std::vector<int64_t> tensor_offsets_;
  std::vector<int64_t> tensor_sizes_;
  std::vector<int64_t> group_sizes_;
};

}  // namespace asgd

#endif  // ASGD_COMPRESSION_GRAD_ENCODER_H_
