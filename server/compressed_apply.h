// Fused decode + optimizer step for compressed gradient chunks
// (compression/grad_codec.h), for a shard's apply thread.
//
// The result is bit for bit what decoding the chunk to float32 and calling
// Optimizer::Apply on it gives:
//
//   std::vector<float> g(chunk.count);
//   DecodeCompressed(chunk, 0, chunk.count, g.data());
//   optimizer.Apply(w, v, g.data() + begin, end - begin, ctx);
//
// because the optimizer's arithmetic is Optimizer::Apply itself, run on
// blocks of kApplyBlock elements whose gradient is decoded into an L1-resident
// scratch block just before; no float32 gradient of the chunk is ever
// materialised in memory. Memory traffic per element: the encoded bytes (1/8
// byte plus 8 bytes per group for one-bit), w read and written, and v read
// and written with momentum.
//
// Top-k without momentum and weight decay touches only the k selected
// elements: their weights (and DC-ASGD backups) are gathered into a block,
// stepped with Optimizer::Apply and scattered back. Every other element has
// gradient 0, which leaves its weight unchanged in Optimizer::Apply too; the
// one difference is when w - backup overflows to Inf for an unselected
// element under DC-ASGD (0 * Inf is NaN there, the weight is kept here). With
// momentum or weight decay every element changes, and top-k runs densely
// over blocks whose scratch gradient is 0 except at the selected indices.
//
// Inputs are validated before anything is written: a CompressedChunk exists
// only after ParseCompressedChunk accepted it, and ApplyCompressedBytes parses
// first.
//
// Thread-safety: pure functions over caller-owned buffers; calls on disjoint
// ranges may run concurrently (as Optimizer::Apply).
#ifndef ASGD_SERVER_COMPRESSED_APPLY_H_
#define ASGD_SERVER_COMPRESSED_APPLY_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "compression/grad_codec.h"
#include "server/optimizer.h"

namespace asgd {

// Elements per decode-then-apply block (8 KiB of float32 scratch).
inline constexpr int64_t kApplyBlock = 2048;

// Applies elements [begin, end) of `chunk` (0 <= begin <= end <= count) as a
// gradient to w[0, end - begin) and, if optimizer.has_state(), v[0, end -
// begin). ctx.backup, when set, points at the end - begin backup values of
// those elements.
void ApplyCompressed(const Optimizer& optimizer, const CompressedChunk& chunk,
                     int64_t begin, int64_t end, float* w, float* v,
                     const UpdateContext& ctx);

// `chunks` laid end to end (a server's range, in flat order); applies
// elements [begin, end) of their concatenation to w[0, end - begin) (and v,
// ctx.backup likewise): a shard's part of a push. end must not exceed the
// sum of the chunks' counts.
void ApplyCompressedRange(const Optimizer& optimizer,
                          absl::Span<const CompressedChunk> chunks,
                          int64_t begin, int64_t end, float* w, float* v,
                          const UpdateContext& ctx);

// Parses `data` (InvalidArgument, nothing written, when malformed or when it
// does not hold exactly n elements) and applies all of it to w[0, n), v.
absl::Status ApplyCompressedBytes(const Optimizer& optimizer,
                                  absl::string_view data,
                                  const CodecLimits& limits, float* w, float* v,
                                  int64_t n, const UpdateContext& ctx);

}  // namespace asgd

#endif  // ASGD_SERVER_COMPRESSED_APPLY_H_
