// OneBitPlan: every 1-bit chunk of a whole-model push as one list, for an
// encoder that holds the whole gradient and residual (a backend's device,
// model/backend.h TakeOneBit) and writes all chunks' bytes in one pass.
//
// Each chunk is a run of the flat model (ModelLayout order) with its groups
// (G, F) as GradEncoder::GroupsOf gives them, and its bytes go to
// offsets[c] of one buffer of total_bytes, in the grad_codec.h format.
// EncodeOneBitPlan is the host reference of that pass: the same bytes and
// residual as grad_codec's EncodeOneBit, chunk by chunk, over one
// `scale * sum + residual` (the average of an accumulated gradient).
//
// Thread-safety: plain values and pure functions.
#ifndef ASGD_COMPRESSION_ONE_BIT_PLAN_H_
#define ASGD_COMPRESSION_ONE_BIT_PLAN_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"

namespace asgd {

struct OneBitChunkPlan {
  int64_t flat_begin = 0;   // first element in the flat model
  int64_t count = 0;        // elements, 1 .. kGradCodecMaxElements
  int64_t group_size = 0;   // G
  int64_t first_group = 0;  // F, 1 .. min(G, count)
};

struct OneBitPlan {
  std::vector<OneBitChunkPlan> chunks;
  std::vector<int64_t> offsets;  // byte offset of each chunk's encoding
  int64_t total_bytes = 0;

  // The bytes of chunk c's encoding.
  int64_t ChunkBytes(size_t c) const {
    return (c + 1 < offsets.size() ? offsets[c + 1] : total_bytes) -
           offsets[c];
  }

  // InvalidArgument unless every chunk is valid (as above) and inside
  // [0, model_size), and no two chunks overlap.
  absl::Status Validate(int64_t model_size) const;
};

// A plan over `chunks`, offsets packed in order (a chunk that is not valid
// takes no bytes: check the plan with Validate).
OneBitPlan MakeOneBitPlan(std::vector<OneBitChunkPlan> chunks);

// The host reference: for every element of every chunk,
// a = float(sum[i] * scale) + residual[i] (each rounded to float32, never
// fused), then each chunk is 1-bit encoded as grad_codec's EncodeOneBit does
// and residual[i] = a - decoded. `out` (plan.total_bytes) receives the
// chunks at plan.offsets. InvalidArgument, with nothing written (neither
// `out` nor the residual), for a plan that Validate refuses, sizes that
// disagree, or any a that is NaN or Inf.
absl::Status EncodeOneBitPlan(const OneBitPlan& plan,
                              absl::Span<const float> sum, float scale,
                              absl::Span<float> residual, absl::Span<char> out);

}  // namespace asgd

#endif  // ASGD_COMPRESSION_ONE_BIT_PLAN_H_
