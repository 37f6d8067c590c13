#include "compression/one_bit_plan.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "compression/grad_codec.h"
#include "compression/plan_encode.h"

namespace asgd {

absl::Status OneBitPlan::Validate(int64_t model_size) const {
  if (offsets.size() != chunks.size()) {
    return absl::InvalidArgumentError("one-bit plan: offsets do not match");
  }
  int64_t end_of_previous = 0;
  int64_t bytes = 0;
  for (size_t c = 0; c < chunks.size(); ++c) {
    const OneBitChunkPlan& p = chunks[c];
    if (p.count < 1 || p.count > kGradCodecMaxElements || p.flat_begin < 0 ||
        p.flat_begin > model_size - p.count || p.group_size < 1 ||
        p.group_size > kGradCodecMaxGroupSize || p.first_group < 1 ||
        p.first_group > std::min(p.group_size, p.count)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "one-bit plan: chunk ", c, " (begin ", p.flat_begin, ", count ",
          p.count, ", groups ", p.group_size, "/", p.first_group,
          ") is not a valid chunk of a ", model_size, "-element model"));
    }
    if (c > 0 && p.flat_begin < end_of_previous) {
      return absl::InvalidArgumentError(absl::StrCat(
          "one-bit plan: chunk ", c, " overlaps or precedes the one before"));
    }
    end_of_previous = p.flat_begin + p.count;
    if (offsets[c] != bytes) {
      return absl::InvalidArgumentError(
          absl::StrCat("one-bit plan: chunk ", c, " at byte ", offsets[c],
                       ", want ", bytes));
    }
    bytes += OneBitEncodedSize(p.count, p.group_size, p.first_group);
  }
  if (bytes != total_bytes) {
    return absl::InvalidArgumentError("one-bit plan: total bytes disagree");
  }
  return absl::OkStatus();
}

OneBitPlan MakeOneBitPlan(std::vector<OneBitChunkPlan> chunks) {
  OneBitPlan plan;
  plan.chunks = std::move(chunks);
  for (const OneBitChunkPlan& p : plan.chunks) {
    plan.offsets.push_back(plan.total_bytes);
    // A chunk that cannot be encoded takes no bytes; Validate refuses it.
    const bool sizable = p.count >= 1 && p.group_size >= 1 &&
                         p.first_group >= 1 && p.first_group <= p.count;
    if (sizable) {
      plan.total_bytes +=
          OneBitEncodedSize(p.count, p.group_size, p.first_group);
    }
  }
  return plan;
}

absl::Status EncodeOneBitPlan(const OneBitPlan& plan,
                              absl::Span<const float> sum, float scale,
                              absl::Span<float> residual,
                              absl::Span<char> out) {
  if (sum.size() != residual.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("one-bit plan: ", sum.size(), " gradient values, ",
                     residual.size(), " residual values"));
  }
  if (static_cast<int64_t>(out.size()) != plan.total_bytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("one-bit plan: output of ", out.size(), " bytes, want ",
                     plan.total_bytes));
  }
  if (absl::Status s = plan.Validate(static_cast<int64_t>(sum.size()));
      !s.ok()) {
    return s;
  }
  std::vector<std::string> encoded;
  if (absl::Status s = plan_encode_internal::EncodeChunksOrNothing(
          "one-bit plan", plan.chunks, sum, scale, residual,
          [](const OneBitChunkPlan& p, absl::Span<const float> average,
             absl::Span<float> chunk_residual, std::string* bytes) {
            return EncodeOneBit(average, p.group_size, p.first_group,
                                chunk_residual, bytes);
          },
          &encoded);
      !s.ok()) {
    return s;
  }
  for (size_t c = 0; c < plan.chunks.size(); ++c) {
    std::memcpy(out.data() + plan.offsets[c], encoded[c].data(),
                encoded[c].size());
  }
  return absl::OkStatus();
}

}  // namespace asgd
