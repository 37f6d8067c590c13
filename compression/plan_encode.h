// EncodeChunksOrNothing: the shared pass of the whole-model encoders'
// host references (one_bit_plan.h EncodeOneBitPlan, top_k_plan.h
// EncodeTopKPlan): each chunk's average float(sum[i] * scale) (rounded once,
// never fused with what follows) encoded on a copy of its residual, and the
// residual written back only when every chunk encoded.
//
// Internal to compression/. Thread-safety: a pure function of its
// arguments.
#ifndef ASGD_COMPRESSION_PLAN_ENCODE_H_
#define ASGD_COMPRESSION_PLAN_ENCODE_H_

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace asgd {
namespace plan_encode_internal {

// Chunk has flat_begin and count inside [0, sum.size()) (a validated plan).
// encode(c, average, residual, &out) encodes chunk c. On its first error,
// InvalidArgument naming `what` and the chunk, with nothing written (neither
// `encoded` nor the residual); else `encoded` holds one string per chunk.
template <typename Chunk, typename Encode>
absl::Status EncodeChunksOrNothing(absl::string_view what,
                                   const std::vector<Chunk>& chunks,
                                   absl::Span<const float> sum, float scale,
                                   absl::Span<float> residual,
                                   const Encode& encode,
                                   std::vector<std::string>* encoded) {
  std::vector<std::string> out(chunks.size());
  std::vector<std::vector<float>> new_residual(chunks.size());
  std::vector<float> average;
  for (size_t c = 0; c < chunks.size(); ++c) {
    const Chunk& p = chunks[c];
    average.resize(p.count);
    for (int64_t i = 0; i < p.count; ++i) {
      average[i] = sum[p.flat_begin + i] * scale;
    }
    new_residual[c].assign(residual.begin() + p.flat_begin,
                           residual.begin() + p.flat_begin + p.count);
    if (absl::Status s =
            encode(p, average, absl::MakeSpan(new_residual[c]), &out[c]);
        !s.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, ": chunk ", c, ": ", s.message()));
    }
  }
  for (size_t c = 0; c < chunks.size(); ++c) {
    std::copy(new_residual[c].begin(), new_residual[c].end(),
              residual.begin() + chunks[c].flat_begin);
  }
  *encoded = std::move(out);
  return absl::OkStatus();
}

}  // namespace plan_encode_internal
}  // namespace asgd

#endif  // ASGD_COMPRESSION_PLAN_ENCODE_H_
