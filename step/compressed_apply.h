// Fused decode + optimizer step for compressed gradient chunks
// (compression/grad_codec.h), for a shard's apply thread and for a worker's
// replay of the same updates (worker/ps/delta_receiver.h).
//
// Exact replay: the conditions of step/optimizer.h hold here too. Decoding
// does no arithmetic (each element takes a float32 the chunk carries: a
// reconstruction value, a top-k value or 0), and the step is
// Optimizer::Apply itself, so the server's apply and the worker's replay of
// one update leave the same bits as long as neither side contracts
// multiply-adds, uses fast-math or changes the order of the operations.
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
// Like Optimizer::Apply, the apply returns the largest |w| and |v| it left,
// taken in the same pass, so that the store can bound the next updates (see
// server/param_store.h). On the sparse path (AppliesSparsely) only the
// selected elements are visited: the maxima are then those of the elements
// it changed, and every other element kept its value.
//
// A push's chunks travel to the shards as one CompressedGradient: the chunks
// of the server's range laid end to end, viewing bytes it owns.
//
// Thread-safety: pure functions over caller-owned buffers; calls on disjoint
// ranges may run concurrently (as Optimizer::Apply).
#ifndef ASGD_STEP_COMPRESSED_APPLY_H_
#define ASGD_STEP_COMPRESSED_APPLY_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "compression/grad_codec.h"
#include "step/optimizer.h"

namespace asgd {

// Elements per decode-then-apply block (8 KiB of float32 scratch).
inline constexpr int64_t kApplyBlock = 2048;

// A validated compressed gradient for a server's whole range: `chunks`
// (all of one encoding) laid end to end in flat order, their counts summing
// to the range's size, viewing bytes that `storage` keeps alive. `max_abs` is
// the largest |decoded value| (the largest |reconstruction value| of a
// one-bit chunk, the largest |value| of a top-k chunk).
struct CompressedGradient {
  GradEncoding encoding = GradEncoding::kOneBit;
  std::shared_ptr<const void> storage;
  std::vector<CompressedChunk> chunks;
  float max_abs = 0.0f;
  // The chunks' bytes as received (grad_codec.h format), laid end to end,
  // and each chunk's byte size; empty when the gradient was made otherwise.
  // Kept for delta pulls (server/update_log.h).
  absl::string_view encoded;
  std::vector<int64_t> encoded_sizes;

  // Elements covered: the sum of the chunks' counts.
  int64_t size() const;
};

// The largest |decoded value| of a chunk, read from its reconstruction values
// (one-bit) or its values (top-k): O(groups) or O(k).
float CompressedMaxAbs(const CompressedChunk& chunk);

// True when applying `encoding` with `optimizer` touches only the selected
// elements (top-k without optimizer state or weight decay).
bool AppliesSparsely(const Optimizer& optimizer, GradEncoding encoding);

// Applies elements [begin, end) of `chunk` (0 <= begin <= end <= count) as a
// gradient to w[0, end - begin) and, if optimizer.has_state(), v[0, end -
// begin). ctx.backup, when set, points at the end - begin backup values of
// those elements. Returns the maxima it left (see above).
ApplyStats ApplyCompressed(const Optimizer& optimizer,
                           const CompressedChunk& chunk, int64_t begin,
                           int64_t end, float* w, float* v,
                           const UpdateContext& ctx);

// `chunks` laid end to end (a server's range, in flat order); applies
// elements [begin, end) of their concatenation to w[0, end - begin) (and v,
// ctx.backup likewise): a shard's part of a push. end must not exceed the
// sum of the chunks' counts. Returns the maxima over every chunk's part.
ApplyStats ApplyCompressedRange(const Optimizer& optimizer,
                                absl::Span<const CompressedChunk> chunks,
                                int64_t begin, int64_t end, float* w, float* v,
                                const UpdateContext& ctx);

// Optimizer::StaysBounded for elements [begin, end) of `chunks` laid end to
// end, on blocks decoded into scratch: true when applying them would leave
// every w and v finite and within kMaxMagnitude. Reads only.
bool CompressedStaysBounded(const Optimizer& optimizer,
                            absl::Span<const CompressedChunk> chunks,
                            int64_t begin, int64_t end, const float* w,
                            const float* v, const UpdateContext& ctx);

// Decodes all of `chunks`, laid end to end, into out[0, sum of counts).
void DecodeCompressedRange(absl::Span<const CompressedChunk> chunks,
                           float* out);

// Parses `data` (InvalidArgument, nothing written, when malformed or when it
// does not hold exactly n elements) and applies all of it to w[0, n), v.
absl::Status ApplyCompressedBytes(const Optimizer& optimizer,
                                  absl::string_view data,
                                  const CodecLimits& limits, float* w, float* v,
                                  int64_t n, const UpdateContext& ctx);

}  // namespace asgd

#endif  // ASGD_STEP_COMPRESSED_APPLY_H_
