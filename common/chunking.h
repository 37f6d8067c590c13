// Chunking of flat float32 ranges into wire chunks, and their reassembly.
//
// A server's part of the model is one flat range (see model_layout.h). On the
// wire it travels as TensorChunks: (tensor name, element offset inside the
// tensor, raw little-endian float32 bytes), in flat order, never crossing a
// tensor boundary and never longer than `max_elements`.
//
// PlanChunks() says how a range is cut; ChunkAssembler checks an incoming
// sequence of chunks against that expectation and decodes the values (float32
// or bfloat16, see wire_codec.h) into a destination buffer, checking for
// NaN/Inf in the same pass. A chunk's data may arrive in pieces (the slices
// of a received gRPC message); an element may straddle two pieces. The
// assembler never reads past the data it is given and never writes outside
// its destination, whatever the input.
//
// Thread-safety: PlanChunks/EncodeFloats are pure. A ChunkAssembler is used by
// one thread at a time.
#ifndef ASGD_COMMON_CHUNKING_H_
#define ASGD_COMMON_CHUNKING_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "common/model_layout.h"
#include "common/wire_codec.h"

namespace asgd {

// 256 Ki floats = 1 MiB per chunk: well under gRPC's 4 MB default limit.
inline constexpr int64_t kDefaultMaxChunkElements = 256 * 1024;

struct ChunkRef {
  int tensor = 0;          // tensor index in the layout
  int64_t offset = 0;      // element offset inside the tensor
  int64_t flat_begin = 0;  // element offset in the flat model
  int64_t count = 0;       // number of elements
};

// The chunks that carry `range`, in order.
std::vector<ChunkRef> PlanChunks(const ModelLayout& layout, FlatRange range,
                                 int64_t max_elements);

// Appends `count` floats from `src` to `out` as little-endian bytes.
void AppendFloats(const float* src, int64_t count, std::string* out);

// A received TensorChunk whose bytes live elsewhere (a protobuf message, or
// the slices of a gRPC message): the data may come in several pieces.
struct TensorChunkView {
  absl::string_view tensor;
  uint64_t offset = 0;
  int dtype = 0;  // asgd.v1.WireDtype as sent, possibly unknown
  absl::InlinedVector<absl::string_view, 4> data;
};

// Why a chunk sequence was rejected; bounded set, used as a metric label.
enum class ChunkError {
  kNone,
  kUnknownTensor,  // no tensor of that name, or not held by this server
  kBadSize,        // byte length not a positive multiple of the element
                   // size, too long, or an unknown element encoding
  kBadSequence,    // out of order, gap, overlap, past the end, incomplete
  kNonFinite,      // NaN or Inf in the data
};
absl::string_view ChunkErrorName(ChunkError e);

// The order checks of a chunk sequence, whatever the chunks' encoding: chunks
// must cover exactly `range` of `layout`, in layout order, each inside one
// tensor and at most `max_elements` long. ChunkAssembler (float chunks) and
// the server's compressed-push assembly use it; each decodes the data itself.
//
//   ChunkSequence seq(&layout, range, max_elements);
//   int t;
//   if (!seq.Tensor(name, &t).ok()) ...       // unknown or not held here
//   ... work out the chunk's element count ...
//   absl::StatusOr<int64_t> at = seq.Place(t, name, offset, count);
//   // *at: the chunk's first element, relative to range.begin
//   ...
//   seq.Finish(declared_chunks);               // complete and counted right
//
// The first error is final: it sets error(), and every later call fails.
class ChunkSequence {
 public:
  ChunkSequence(const ModelLayout* layout, FlatRange range,
                int64_t max_elements);

  // The index of tensor `name` (kUnknownTensor: no such tensor, or none of
  // its elements are in the range).
  absl::Status Tensor(absl::string_view name, int* tensor);
  // Checks that `count` elements of tensor `tensor` (named `name`) at
  // `offset` are the next chunk (kBadSize: more than max_elements or than
  // remain of this slice; kBadSequence: out of order or past the range) and
  // advances; returns where they start, relative to range.begin.
  absl::StatusOr<int64_t> Place(int tensor, absl::string_view name,
                                uint64_t offset, int64_t count);
  // InvalidArgument (kBadSequence) unless every element has been placed and
  // `declared_chunks` chunks were.
  absl::Status Finish(uint64_t declared_chunks);

  // Records an error found by the caller (e.g. in the chunk's data).
  absl::Status Fail(ChunkError error, std::string message);

  int64_t max_elements() const { return max_elements_; }
  int64_t chunks_received() const { return chunks_; }
  ChunkError error() const { return error_; }

 private:
  const ModelLayout* layout_;
  int64_t range_begin_;
  int64_t max_elements_;
  std::vector<Slice> slices_;
  size_t slice_ = 0;  // current slice
  int64_t next_ = 0;  // next expected element offset inside the tensor
  int64_t chunks_ = 0;
  ChunkError error_ = ChunkError::kNone;
};

class ChunkAssembler {
 public:
  // Expects chunks covering exactly `range` of `layout` and writes element
  // flat_begin + i to dst[flat_begin + i - range.begin]. `dst` must hold
  // range.size() floats and outlive the assembler. When `check_finite`,
  // NaN/Inf values are rejected.
  ChunkAssembler(const ModelLayout* layout, FlatRange range,
                 int64_t max_elements, float* dst, bool check_finite);

  // Accepts the next chunk. On error returns InvalidArgument saying what was
  // wrong (a tensor name from the sender is escaped and cut to a few dozen
  // bytes, see text_quote.h), sets error(), and rejects every later call.
  // Values of a rejected chunk may have been partly copied into dst: callers
  // stage into a buffer they discard on error. `dtype` is the chunk's element
  // encoding, as the int on the wire (an unknown value is rejected as
  // kBadSize).
  absl::Status Add(absl::string_view tensor, uint64_t offset,
                   absl::Span<const absl::string_view> data, int dtype);
  absl::Status Add(absl::string_view tensor, uint64_t offset,
                   absl::string_view data, int dtype = 0) {
    return Add(tensor, offset, absl::MakeConstSpan(&data, 1), dtype);
  }
  absl::Status Add(const TensorChunkView& chunk) {
    return Add(chunk.tensor, chunk.offset, chunk.data, chunk.dtype);
  }

  // InvalidArgument unless every element of the range has arrived and the
  // sender's chunk count matches.
  absl::Status Finish(uint64_t declared_chunks);

  int64_t chunks_received() const { return sequence_.chunks_received(); }
  ChunkError error() const { return sequence_.error(); }
  // The largest |value| accepted so far (0 before any chunk), taken by the
  // decode pass itself.
  float max_abs() const { return max_abs_; }

 private:
  ChunkSequence sequence_;
  float* dst_;
  bool check_finite_;
  float max_abs_ = 0.0f;
};

}  // namespace asgd

#endif  // ASGD_COMMON_CHUNKING_H_
