#include "shrink/prune.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/model_layout.h"
#include "common/status_macros.h"
#include "model/prune_mask.h"

namespace asgd {
namespace {

struct Span {
  std::string name;
  int64_t offset = 0;
  int64_t size = 0;
};

// Zeros the floor(sparsity * n) smallest |w| over `spans` (position breaks
// ties).
void PruneSmallest(const std::vector<Span>& spans, double sparsity,
                   std::vector<float>* params) {
  std::vector<int64_t> index;
  for (const Span& s : spans) {
    for (int64_t i = s.offset; i < s.offset + s.size; ++i) index.push_back(i);
  }
  const int64_t count = static_cast<int64_t>(
      std::floor(sparsity * static_cast<double>(index.size())));
  if (count == 0) return;
  const std::vector<float>& w = *params;
  std::nth_element(index.begin(), index.begin() + (count - 1), index.end(),
                   [&](int64_t a, int64_t b) {
                     const float fa = std::fabs(w[a]), fb = std::fabs(w[b]);
                     return fa < fb || (fa == fb && a < b);
                   });
  for (int64_t j = 0; j < count; ++j) (*params)[index[j]] = 0.0f;
}

}  // namespace

absl::StatusOr<PruneResult> PruneByMagnitude(const SavedModel& model,
                                             const PruneOptions& options) {
  ASGD_RETURN_IF_ERROR(ValidateModelSpec(model.spec));
  if (static_cast<int64_t>(model.params.size()) !=
      ModelParamCount(model.spec)) {
    return absl::InvalidArgumentError("the model's parameters do not match "
                                      "its spec");
  }
  if (!(options.sparsity >= 0 && options.sparsity < 1)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "sparsity ", options.sparsity, ": must be in [0, 1)"));
  }
  ASGD_RETURN_IF_ERROR(CheckPrunedTensors(model.spec, options.tensors));
  const std::set<std::string> named(options.tensors.begin(),
                                    options.tensors.end());
  ASGD_ASSIGN_OR_RETURN(const ModelLayout layout,
                        ModelLayout::Create(ModelTensors(model.spec), 1, 1));
  std::vector<Span> spans;
  for (int t = 0; t < static_cast<int>(layout.tensors().size()); ++t) {
    const std::string& name = layout.tensors()[t].name;
    const bool chosen = named.empty() ? !absl::EndsWith(name, "bias")
                                      : named.count(name) > 0;
    if (chosen) {
      spans.push_back({name, layout.tensor_offset(t), layout.tensor_size(t)});
    }
  }
  PruneResult result;
  result.model = model;
  std::vector<float>& params = result.model.params;
  if (options.per_tensor) {
    for (const Span& s : spans) PruneSmallest({s}, options.sparsity, &params);
  } else {
    PruneSmallest(spans, options.sparsity, &params);
  }
  std::set<std::string> pruned(model.pruned.begin(), model.pruned.end());
  for (const Span& s : spans) pruned.insert(s.name);
  result.model.pruned.clear();
  for (const TensorSpec& t : layout.tensors()) {  // model order
    if (pruned.count(t.name) > 0) result.model.pruned.push_back(t.name);
  }
  const std::vector<uint8_t> keep =
      KeepMask(result.model.spec, params, result.model.pruned);
  for (const std::string& name : result.model.pruned) {
    const int t = layout.FindTensor(name);
    const int64_t n = layout.tensor_size(t);
    result.tensors.push_back(
        {name, n,
         CountPruned(absl::MakeConstSpan(keep).subspan(layout.tensor_offset(t),
                                                       n))});
  }
  result.params = static_cast<int64_t>(params.size());
  result.pruned = CountPruned(keep);
  return result;
}

}  // namespace asgd
