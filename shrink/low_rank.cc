#include "shrink/low_rank.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/status_macros.h"
#include "shrink/svd.h"

namespace asgd {
namespace {

std::string LayerName(const ModelSpec& spec, int layer) {
  return layer == static_cast<int>(spec.layers.size())
             ? std::string("the output layer")
             : absl::StrCat("layer ", layer);
}

// Checks the request against the spec and sorts it by layer.
absl::Status CheckRequest(const ModelSpec& spec,
                          std::vector<LayerRank>* layers) {
  if (layers->empty()) {
    return absl::InvalidArgumentError("no layer to factor");
  }
  std::sort(layers->begin(), layers->end(),
            [](const LayerRank& a, const LayerRank& b) {
              return a.layer < b.layer;
            });
  const int out = static_cast<int>(spec.layers.size());
  for (size_t i = 0; i < layers->size(); ++i) {
    const LayerRank& l = (*layers)[i];
    if (l.layer < 0 || l.layer > out) {
      return absl::InvalidArgumentError(absl::StrCat(
          "layer ", l.layer, " does not exist: the model has hidden layers 0.."
          , out - 1, " and the output layer ", out));
    }
    if (i > 0 && (*layers)[i - 1].layer == l.layer) {
      return absl::InvalidArgumentError(
          absl::StrCat(LayerName(spec, l.layer), " is listed twice"));
    }
    if (l.layer < out && spec.layers[l.layer].kind != LayerKind::kDense) {
      return absl::InvalidArgumentError(absl::StrCat(
          LayerName(spec, l.layer), " is a ",
          LayerKindName(spec.layers[l.layer].kind),
          " layer; only dense layers and the output layer can be factored"));
    }
    const int64_t units = l.layer < out ? spec.layers[l.layer].dense.units
                                        : spec.output_dim();
    const int64_t inputs = LayerInputShape(spec, l.layer).dim();
    const int64_t full = std::min(units, inputs);
    if (l.rank != 0 && (l.rank < 1 || l.rank > full)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "rank ", l.rank, " for ", LayerName(spec, l.layer), " (", units,
          " x ", inputs, "): must be in [1, ", full, "]"));
    }
    if (l.rank == 0 && !(l.energy > 0 && l.energy <= 1)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "kept energy ", l.energy, " for ", LayerName(spec, l.layer),
          ": must be in (0, 1] (or give a rank)"));
    }
  }
  return absl::OkStatus();
}

// Appends B, its zero bias, A and `bias` for W ≈ A B at `rank`.
void AppendFactors(const Svd& svd, int rank, absl::Span<const float> bias,
                   std::vector<float>* out) {
  std::vector<double> root(rank);
  for (int p = 0; p < rank; ++p) root[p] = std::sqrt(svd.s[p]);
  for (int p = 0; p < rank; ++p) {  // B = sqrt(S_r) Vᵀ_r
    for (int64_t j = 0; j < svd.n; ++j) {
      out->push_back(static_cast<float>(root[p] * svd.vt[p * svd.n + j]));
    }
  }
  out->insert(out->end(), rank, 0.0f);
  for (int64_t i = 0; i < svd.m; ++i) {  // A = U_r sqrt(S_r)
    for (int p = 0; p < rank; ++p) {
      out->push_back(static_cast<float>(svd.u[i * svd.k + p] * root[p]));
    }
  }
  out->insert(out->end(), bias.begin(), bias.end());
}

}  // namespace

absl::StatusOr<std::vector<LayerRank>> ParseLayerRanks(absl::string_view text,
                                                       const ModelSpec& spec,
                                                       int rank, double energy) {
  const int out = static_cast<int>(spec.layers.size());
  std::vector<LayerRank> layers;
  for (absl::string_view item : absl::StrSplit(text, ',', absl::SkipEmpty())) {
    std::vector<absl::string_view> parts = absl::StrSplit(item, ':');
    LayerRank l;
    l.rank = rank;
    l.energy = energy;
    if (parts.size() > 2 ||
        (parts.size() == 2 && (!absl::SimpleAtoi(parts[1], &l.rank) ||
                               l.rank < 1))) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--factor item '", item, "': want LAYER or LAYER:RANK with RANK >= 1"));
    }
    if (parts[0] == "all") {
      if (parts.size() == 2) {
        return absl::InvalidArgumentError("--factor: 'all' takes no rank");
      }
      for (int i = 0; i <= out; ++i) {
        if (i < out && spec.layers[i].kind != LayerKind::kDense) continue;
        const int64_t units = i < out ? spec.layers[i].dense.units
                                      : spec.output_dim();
        const int64_t full = std::min<int64_t>(
            units, LayerInputShape(spec, i).dim());
        if (rank > 0 && rank >= full) continue;  // would not shrink it
        l.layer = i;
        layers.push_back(l);
      }
      continue;
    }
    if (parts[0] == "output") {
      l.layer = out;
    } else if (!absl::SimpleAtoi(parts[0], &l.layer)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--factor item '", item,
          "': a layer is a hidden layer's index, 'output' or 'all'"));
    }
    layers.push_back(l);
  }
  if (layers.empty()) {
    return absl::InvalidArgumentError("--factor names no layer");
  }
  return layers;
}

int RankForEnergy(absl::Span<const double> s, double energy) {
  double total = 0;
  for (double v : s) total += v * v;
  double kept = 0;
  for (size_t r = 0; r < s.size(); ++r) {
    kept += s[r] * s[r];
    if (kept >= energy * total) return static_cast<int>(r) + 1;
  }
  return std::max<int>(1, static_cast<int>(s.size()));
}

absl::StatusOr<LowRankResult> FactorLowRank(const ModelSpec& spec,
                                            absl::Span<const float> params,
                                            std::vector<LayerRank> layers) {
  ASGD_RETURN_IF_ERROR(ValidateModelSpec(spec));
  if (static_cast<int64_t>(params.size()) != ModelParamCount(spec)) {
    return absl::InvalidArgumentError(
        absl::StrCat("the model has ", ModelParamCount(spec),
                     " parameters, given ", params.size()));
  }
  ASGD_RETURN_IF_ERROR(CheckRequest(spec, &layers));
  LowRankResult result;
  ModelSpec& out = result.model.spec;
  out = spec;
  out.layers.clear();
  std::vector<float>& values = result.model.params;
  const int num_out = static_cast<int>(spec.layers.size());
  size_t next = 0;  // the next entry of `layers`
  for (int l = 0; l <= num_out; ++l) {
    const int64_t offset = LayerParamOffset(spec, l);
    const int64_t count = LayerParamCount(spec, l);
    const bool factor = next < layers.size() && layers[next].layer == l;
    if (!factor) {
      if (l < num_out) out.layers.push_back(spec.layers[l]);
      values.insert(values.end(), params.begin() + offset,
                    params.begin() + offset + count);
      continue;
    }
    const LayerRank& want = layers[next++];
    FactoredLayer f;
    f.layer = l;
    f.units = l < num_out ? spec.layers[l].dense.units : spec.output_dim();
    f.inputs = LayerInputShape(spec, l).dim();
    const absl::Span<const float> w =
        params.subspan(offset, f.units * f.inputs);
    const absl::Span<const float> bias =
        params.subspan(offset + f.units * f.inputs, f.units);
    ASGD_ASSIGN_OR_RETURN(Svd svd, ComputeSvd(w, f.units, f.inputs));
    f.rank = want.rank > 0 ? want.rank : RankForEnergy(svd.s, want.energy);
    double kept = 0;
    double dropped = 0;
    for (int64_t p = 0; p < svd.k; ++p) {
      (p < f.rank ? kept : dropped) += svd.s[p] * svd.s[p];
    }
    const double total = kept + dropped;
    f.kept_energy = total > 0 ? kept / total : 1.0;
    f.relative_error = total > 0 ? std::sqrt(dropped / total) : 0.0;
    f.params_before = count;
    f.params_after = f.rank * (f.inputs + 1) + f.units * (f.rank + 1);
    out.layers.push_back(LayerSpec::Dense(f.rank, Activation::kNone));
    if (l < num_out) out.layers.push_back(spec.layers[l]);
    AppendFactors(svd, f.rank, bias, &values);
    result.layers.push_back(f);
  }
  ASGD_RETURN_IF_ERROR(ValidateModelSpec(out));
  if (static_cast<int64_t>(values.size()) != ModelParamCount(out)) {
    return absl::InternalError("factored parameters do not match the spec");
  }
  return result;
}

}  // namespace asgd
