#include "kaldi/bad_data.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/types/optional.h"

namespace asgd::kaldi {
namespace {

constexpr absl::string_view kPayloadUrl = "type.asgd/asgd.kaldi.BadDataReason";

constexpr std::array<absl::string_view, kNumBadDataReasons> kNames = {
    "none",
    "malformed_line",
    "bad_range",
    "offset_past_end",
    "truncated",
    "unknown_token",
    "malformed_object",
    "too_large",
    "non_finite",
    "feature_magnitude",
    "dim_mismatch",
    "missing_alignment",
    "length_mismatch",
    "label_out_of_range",
    "duplicate_key",
    "missing_speaker",
    "bad_cmvn",
    "missing_teacher",
    "bad_teacher",
};

}  // namespace

absl::string_view BadDataReasonName(BadDataReason reason) {
  const int i = static_cast<int>(reason);
  if (i < 0 || i >= kNumBadDataReasons) return "unknown";
  return kNames[i];
}

std::string FormatLocation(const DataLocation& where) {
  std::string out = where.file.empty() ? "<unnamed>" : where.file;
  if (where.line > 0) absl::StrAppend(&out, " line ", where.line);
  if (where.offset >= 0) absl::StrAppend(&out, " at byte ", where.offset);
  if (!where.key.empty()) absl::StrAppend(&out, " (utterance ", where.key, ")");
  return out;
}

absl::Status BadDataError(BadDataReason reason, const DataLocation& where,
                          absl::string_view what) {
  absl::Status status = absl::InvalidArgumentError(absl::StrCat(
      FormatLocation(where), ": ", BadDataReasonName(reason), ": ", what));
  status.SetPayload(kPayloadUrl, absl::Cord(BadDataReasonName(reason)));
  return status;
}

BadDataReason BadDataReasonOf(const absl::Status& status) {
  if (status.code() != absl::StatusCode::kInvalidArgument) {
    return BadDataReason::kNone;
  }
  const absl::optional<absl::Cord> payload = status.GetPayload(kPayloadUrl);
  if (!payload.has_value()) return BadDataReason::kNone;
  const std::string name(*payload);
  for (int i = 1; i < kNumBadDataReasons; ++i) {
    if (kNames[i] == name) return static_cast<BadDataReason>(i);
  }
  return BadDataReason::kNone;
}

absl::Status CheckFeatureValues(absl::Span<const float> values, int cols,
                                float max_magnitude, const DataLocation& where,
                                absl::string_view stage, float* max_abs) {
  // At most the largest float, so that Inf is beyond it whatever the bound.
  const float bound =
      std::min(max_magnitude, std::numeric_limits<float>::max());
  float largest = 0;
  bool within = true;
  for (const float v : values) {
    const float a = std::fabs(v);
    within &= a <= bound;  // false for NaN and Inf
    largest = std::max(largest, a);
  }
  if (within) {
    if (max_abs != nullptr) *max_abs = largest;
    return absl::OkStatus();
  }
  const int width = std::max(cols, 1);
  for (size_t i = 0; i < values.size(); ++i) {
    const float v = values[i];
    if (std::fabs(v) <= bound) continue;
    const std::string at = absl::StrCat("feature row ", i / width, ", column ",
                                        i % width, " ", stage, " is ", v);
    if (!std::isfinite(v)) {
      return BadDataError(BadDataReason::kNonFinite, where, at);
    }
    return BadDataError(
        BadDataReason::kFeatureMagnitude, where,
        absl::StrCat(at, ", beyond the bound of ", max_magnitude,
                     " on |feature| (max_feature_magnitude)"));
  }
  return absl::OkStatus();  // not reached
}

absl::StatusOr<BadDataPolicy> ParseBadDataPolicy(absl::string_view text) {
  if (text == "refuse") return BadDataPolicy::kRefuse;
  if (text == "skip") return BadDataPolicy::kSkip;
  return absl::InvalidArgumentError(absl::StrCat(
      "bad-data policy must be \"refuse\" or \"skip\", not \"", text, "\""));
}

int64_t BadDataCounts::Total() const {
  int64_t total = 0;
  for (int64_t n : by_reason) total += n;
  return total;
}

std::string BadDataCounts::ToString() const {
  std::vector<std::string> parts;
  for (int i = 1; i < kNumBadDataReasons; ++i) {
    if (by_reason[i] != 0) {
      parts.push_back(absl::StrCat(kNames[i], "=", by_reason[i]));
    }
  }
  return parts.empty() ? "none" : absl::StrJoin(parts, " ");
}

}  // namespace asgd::kaldi
