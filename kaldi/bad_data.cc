#include "kaldi/bad_data.h"

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
    "dim_mismatch",
    "missing_alignment",
    "length_mismatch",
    "label_out_of_range",
    "duplicate_key",
    "missing_speaker",
    "bad_cmvn",
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
