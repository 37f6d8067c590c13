#include "model/prune_mask.h"

#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/model_layout.h"

namespace asgd {

absl::Status CheckPrunedTensors(const ModelSpec& spec,
                                absl::Span<const std::string> pruned) {
  std::set<std::string> names;
  for (const TensorSpec& t : ModelTensors(spec)) names.insert(t.name);
  std::set<std::string> seen;
  for (const std::string& name : pruned) {
    if (names.count(name) == 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "pruned tensor '", name.substr(0, 100), "' is not in the model"));
    }
    if (!seen.insert(name).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("pruned tensor '", name, "' is listed twice"));
    }
  }
  return absl::OkStatus();
}

std::vector<uint8_t> KeepMask(const ModelSpec& spec,
                              absl::Span<const float> params,
                              absl::Span<const std::string> pruned) {
  std::vector<uint8_t> keep(params.size(), 1);
  // A valid spec's tensors always make a layout.
  const absl::StatusOr<ModelLayout> layout =
      ModelLayout::Create(ModelTensors(spec), 1, 1);
  if (!layout.ok()) return keep;
  for (const std::string& name : pruned) {
    const int t = layout->FindTensor(name);
    if (t < 0) continue;  // CheckPrunedTensors refuses it
    const int64_t end = layout->tensor_offset(t) + layout->tensor_size(t);
    for (int64_t i = layout->tensor_offset(t); i < end; ++i) {
      keep[i] = params[i] != 0.0f;
    }
  }
  return keep;
}

int64_t CountPruned(absl::Span<const uint8_t> keep) {
  int64_t n = 0;
  for (uint8_t k : keep) n += k == 0;
  return n;
}

std::string KeepMaskDigest(absl::Span<const uint8_t> keep) {
  uint64_t h = 1469598103934665603ULL;
  for (uint8_t k : keep) {
    h ^= k;
    h *= 1099511628211ULL;
  }
  return absl::StrCat(absl::Hex(h, absl::kZeroPad16));
}

std::string ModelIdWithMask(const std::string& spec_id,
                            absl::string_view mask_digest) {
  if (mask_digest.empty()) return spec_id;
  return absl::StrCat(spec_id, "/pruned-", mask_digest);
}

std::string JoinPrunedTensors(absl::Span<const std::string> pruned) {
  return absl::StrJoin(pruned, ",");
}

std::vector<std::string> PrunedTensorsOf(
    const std::map<std::string, std::string>& attributes) {
  auto it = attributes.find(kPrunedTensorsAttribute);
  if (it == attributes.end()) return {};
  return absl::StrSplit(it->second, ',', absl::SkipEmpty());
}

}  // namespace asgd
