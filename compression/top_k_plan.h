// TopKPlan: every top-k chunk of a whole-model push as one list, for an
// encoder that holds the whole gradient and residual (a backend's device,
// model/backend.h TakeTopK) and encodes all chunks in one pass.
//
// Each chunk is a run of the flat model (ModelLayout order) and the number
// k of its elements sent, as GradEncoder gives them (TopKCount of the
// fraction). EncodeTopKPlan is the host reference of that pass: the same
// bytes and residual as grad_codec's EncodeTopK, chunk by chunk, over one
// `scale * sum + residual` (the average of an accumulated gradient).
// TopKChunkBytes writes a chunk's bytes from its selected entries, for an
// encoder that selects them elsewhere (a device) and hands the host only
// the entries.
//
// Thread-safety: plain values and pure functions.
#ifndef ASGD_COMPRESSION_TOP_K_PLAN_H_
#define ASGD_COMPRESSION_TOP_K_PLAN_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"

namespace asgd {

struct TopKChunkPlan {
  int64_t flat_begin = 0;  // first element in the flat model
  int64_t count = 0;       // elements, 1 .. kGradCodecMaxElements
  int64_t k = 0;           // elements sent, 0 .. count
};

struct TopKPlan {
  std::vector<TopKChunkPlan> chunks;
  // The sum of the chunks' k (the entries of one encoding), and the largest
  // chunk.
  int64_t total_k() const;
  int64_t max_count() const;

  // InvalidArgument unless every chunk is valid (as above) and inside
  // [0, model_size), and no two chunks overlap or come out of order.
  absl::Status Validate(int64_t model_size) const;
};

// The host reference: for every element of every chunk,
// a = float(sum[i] * scale) + residual[i] (each rounded to float32, never
// fused), then each chunk is top-k encoded as grad_codec's EncodeTopK does
// (the k largest |a|, ties to the lower index) and residual[i] = a for the
// elements not sent, 0 for those sent. `out` receives one string per chunk.
// InvalidArgument, with nothing written (neither `out` nor the residual),
// for a plan that Validate refuses, sizes that disagree, or any a that is
// NaN or Inf.
absl::Status EncodeTopKPlan(const TopKPlan& plan, absl::Span<const float> sum,
                            float scale, absl::Span<float> residual,
                            std::vector<std::string>* out);

// The grad_codec bytes of a top-k chunk of `count` elements whose selected
// entries are `indices` (within the chunk, strictly increasing, below
// count) with `values` (finite): what EncodeTopK writes when it selects
// them. InvalidArgument, with `out` unchanged, for indices that are not so
// or values that are not finite.
absl::Status TopKChunkBytes(int64_t count, absl::Span<const uint32_t> indices,
                            absl::Span<const float> values, std::string* out);

}  // namespace asgd

#endif  // ASGD_COMPRESSION_TOP_K_PLAN_H_
