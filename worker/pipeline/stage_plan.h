// StagePlan: which layers each stage of a pipeline holds (pipelined
// back-propagation: each stage a worker with its own backend). Layer i < spec.layers.size()
// is hidden layer i, layer spec.layers.size() the output layer (with the
// loss); a stage holds a contiguous range of them, model/layer_range.h.
//
// Delays: minibatches stream through the stages, each stage running one
// forward and one backward pass per step (so stage s of S has S - s
// minibatches in flight); stage s updates its weights with the gradient of
// a minibatch whose forward pass ran S - 1 - s updates earlier (the last
// stage at once, the first the most).
//
// A plan is given (ParseStagePlan: "0-1,2,3-4") or balanced
// (BalanceStages): the stages' training work per minibatch (multiply-adds,
// forward and backward, LayerTrainingMacsPerRow × rows) as even as a
// contiguous cut allows, the largest stage as small as it can be; among the
// cuts that achieve that, the one whose largest stage holds the fewest
// parameter bytes.
//
// Thread-safety: values and pure functions.
#ifndef ASGD_WORKER_PIPELINE_STAGE_PLAN_H_
#define ASGD_WORKER_PIPELINE_STAGE_PLAN_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "model/model_spec.h"

namespace asgd {

struct StagePlan {
  // stages() + 1 increasing layer indices from 0 to spec.layers.size() + 1:
  // stage s holds layers [bounds[s], bounds[s + 1]).
  std::vector<int> bounds;

  int stages() const { return static_cast<int>(bounds.size()) - 1; }
  // Updates of stage s between its forward pass of a minibatch and the
  // update with that minibatch's gradient: stages() - 1 - s.
  int Delay(int stage) const { return stages() - 1 - stage; }
};

// What one stage costs per minibatch of `rows` rows.
struct StageCost {
  int64_t macs = 0;         // training multiply-adds
  int64_t param_bytes = 0;  // float32 parameters it holds
};

StageCost CostOfStage(const ModelSpec& spec, const StagePlan& plan, int stage,
                      int rows);

// The balanced plan of `num_stages` stages (see above). InvalidArgument
// when num_stages < 1 or more than the model's layers, or rows < 1.
absl::StatusOr<StagePlan> BalanceStages(const ModelSpec& spec, int num_stages,
                                        int rows);

// A plan from "A-B,C,D-E" (each stage a layer or an inclusive range of
// layers, in order, together exactly the model's layers, the output layer
// being spec.layers.size()). InvalidArgument naming what is wrong.
absl::StatusOr<StagePlan> ParseStagePlan(const ModelSpec& spec,
                                         absl::string_view text);

// One line per stage, e.g. "stage 1: layers 2-3, 1.2 G multiply-adds per
// minibatch (38%), 0.8 MB of parameters, delay 0".
std::string DescribeStagePlan(const ModelSpec& spec, const StagePlan& plan,
                              int rows);

}  // namespace asgd

#endif  // ASGD_WORKER_PIPELINE_STAGE_PLAN_H_
