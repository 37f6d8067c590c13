#include "worker/pipeline/stage_plan.h"

#include <algorithm>
#include <limits>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"

namespace asgd {
namespace {

int NumLayers(const ModelSpec& spec) {
  return static_cast<int>(spec.layers.size()) + 1;
}

// (largest macs, largest bytes) of a cut, compared in that order.
using Worst = std::pair<int64_t, int64_t>;

}  // namespace

StageCost CostOfStage(const ModelSpec& spec, const StagePlan& plan, int stage,
                      int rows) {
  StageCost cost;
  for (int i = plan.bounds[stage]; i < plan.bounds[stage + 1]; ++i) {
    cost.macs += LayerTrainingMacsPerRow(spec, i) * rows;
    cost.param_bytes += LayerParamCount(spec, i) * int64_t{sizeof(float)};
  }
  return cost;
}

absl::StatusOr<StagePlan> BalanceStages(const ModelSpec& spec, int num_stages,
                                        int rows) {
  const int n = NumLayers(spec);
  if (num_stages < 1 || num_stages > n || rows < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "cannot cut a model of ", n, " layers (hidden and output) into ",
        num_stages, " stages of ", rows, " rows: want 1 to ", n,
        " stages and at least 1 row"));
  }
  // best[s][i]: the best worst stage of layers [0, i) in s stages, and
  // where its last stage starts.
  const Worst kNone = {std::numeric_limits<int64_t>::max(),
                       std::numeric_limits<int64_t>::max()};
  std::vector<std::vector<Worst>> best(num_stages + 1,
                                       std::vector<Worst>(n + 1, kNone));
  std::vector<std::vector<int>> start(num_stages + 1, std::vector<int>(n + 1));
  best[0][0] = {0, 0};
  for (int s = 1; s <= num_stages; ++s) {
    for (int i = s; i <= n; ++i) {
      for (int j = s - 1; j < i; ++j) {
        if (best[s - 1][j] == kNone) continue;
        const StageCost last = CostOfStage(spec, StagePlan{{j, i}}, 0, rows);
        const Worst w = {std::max(best[s - 1][j].first, last.macs),
                         std::max(best[s - 1][j].second, last.param_bytes)};
        if (w < best[s][i]) {
          best[s][i] = w;
          start[s][i] = j;
        }
      }
    }
  }
  StagePlan plan;
  plan.bounds.assign(num_stages + 1, 0);
  plan.bounds[num_stages] = n;
  for (int s = num_stages, i = n; s > 0; --s) {
    i = start[s][i];
    plan.bounds[s - 1] = i;
  }
  return plan;
}

absl::StatusOr<StagePlan> ParseStagePlan(const ModelSpec& spec,
                                         absl::string_view text) {
  const int n = NumLayers(spec);
  StagePlan plan;
  plan.bounds.push_back(0);
  for (absl::string_view part : absl::StrSplit(text, ',')) {
    const std::vector<absl::string_view> ends = absl::StrSplit(part, '-');
    int first = 0, last = 0;
    if (ends.size() > 2 || !absl::SimpleAtoi(ends.front(), &first) ||
        !absl::SimpleAtoi(ends.back(), &last)) {
      return absl::InvalidArgumentError(
          absl::StrCat("stage '", part, "' of '", text,
                       "': want a layer or a range A-B of layers"));
    }
    if (first != plan.bounds.back() || last < first || last >= n) {
      return absl::InvalidArgumentError(absl::StrCat(
          "stage '", part, "' of '", text, "': stage ", plan.stages(),
          " must start at layer ", plan.bounds.back(),
          " and end at or after it, before layer ", n,
          " (the model's layers are 0 to ", n - 1, ", the last the output)"));
    }
    plan.bounds.push_back(last + 1);
  }
  if (plan.bounds.back() != n) {
    return absl::InvalidArgumentError(
        absl::StrCat("stages '", text, "' stop at layer ",
                     plan.bounds.back() - 1, ": the last must end with the "
                     "output layer ", n - 1));
  }
  return plan;
}

std::string DescribeStagePlan(const ModelSpec& spec, const StagePlan& plan,
                              int rows) {
  int64_t total = 0;
  for (int s = 0; s < plan.stages(); ++s) {
    total += CostOfStage(spec, plan, s, rows).macs;
  }
  std::string out;
  for (int s = 0; s < plan.stages(); ++s) {
    const StageCost c = CostOfStage(spec, plan, s, rows);
    const int first = plan.bounds[s], last = plan.bounds[s + 1] - 1;
    absl::StrAppendFormat(
        &out, "stage %d: layer%s %s, %.3g G multiply-adds per minibatch "
              "(%.0f%%), %.3g MB of parameters, delay %d\n",
        s, first == last ? "" : "s",
        first == last ? absl::StrCat(first) : absl::StrCat(first, "-", last),
        c.macs / 1e9, total > 0 ? 100.0 * c.macs / total : 0.0,
        c.param_bytes / 1e6, plan.Delay(s));
  }
  return out;
}

}  // namespace asgd
