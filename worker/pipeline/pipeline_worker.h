// RunPipelineStage: one stage of a pipeline run (asgd_worker
// --mode=pipeline) from start to end:
//
//  1. the plan (--stage_plan, or balanced over --stages by training work,
//     stage_plan.h) and the local learning rate (given, or the pool's);
//  2. the model pulled from the parameter servers: every stage starts from
//     the pool's model and keeps only its own layers' weights;
//  3. stage s > 0 listens for stage s - 1 (StageServer); stage s <
//     stages - 1 connects to stage s + 1 (GrpcDownstream); stage 0 draws
//     the minibatches (DataUpstream), logs the training progress and
//     evaluates on `heldout` (may be null) through the pipeline;
//  4. the schedule (StageRunner: one-forward-one-backward, the window and
//     delays of --pipeline_depth);
//  5. the weights (stage_updaters.h): local, each stage writing its layers
//     into the servers' model once the later stages have (the last first),
//     so the servers hold the trained model (asgd_eval --servers); or on
//     the servers, every update sent to them as it is made, and several
//     pipelines (replicas: loop.worker_index of loop's workers, each on its
//     part of the data) training the same model. A stage that fails hands
//     nothing off: the run stops at every stage with the error, and the
//     servers keep their model.
//
// Log lines: the plan (stage 0), "stage 1: layers 1-2, listening for stage
// 0 on port P", a progress line every loop.log_every updates on stages > 0
// ("stage 1 minibatch 500 busy 64% delay 1 in-flight 2"), and the
// done line "stage 1 done: 500 minibatches in 12.1 s, busy 71% (forward
// 3.1 s, backward 5.5 s, idle 0.0 s), delays {1: 499, 0: 1}, at most 2 in
// flight; layers 1-1 handed to the servers".
//
// Thread-safety: call from one thread.
#ifndef ASGD_WORKER_PIPELINE_PIPELINE_WORKER_H_
#define ASGD_WORKER_PIPELINE_PIPELINE_WORKER_H_

#include <ostream>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/security_options.h"
#include "model/cuda/cuda_options.h"
#include "prometheus/registry.h"
#include "worker/data/batch_source.h"
#include "worker/data/examples.h"
#include "worker/loop/loop.h"
#include "worker/pipeline/stage_plan.h"
#include "worker/pipeline/stage_runner.h"
#include "worker/ps/param_client.h"

namespace asgd {

// Where the stages' weights live (stage_updaters.h).
enum class PipelineWeights {
  kLocal,    // each stage's own; handed to the servers at the end
  kServers,  // on the servers, updated with every minibatch (replicas)
};

struct PipelineStageOptions {
  LoopOptions loop;  // stage 0's data loop; log_every for every stage
  int stage = 0;
  int stages = 0;          // 0: from stage_plan
  std::string stage_plan;  // "" : balanced over `stages`
  int depth = 0;           // stage 0's window; 0: stages (full pipelining)
  PipelineWeights weights = PipelineWeights::kLocal;
  int pull_every = 4;      // kServers: updates between pulls
  float local_learning_rate = 0;  // 0: the pool's learning_rate
  std::string listen_host = "0.0.0.0";
  int stage_port = 0;       // stages > 0; 0: a free port (logged)
  std::string next_stage;   // host:port; every stage but the last
  SecurityOptions security;
  absl::Duration connect_timeout = absl::Seconds(60);
  absl::Duration idle_timeout = absl::Seconds(60);
  OpenBatchSource open_source;  // streamed data (stage 0), may be null
  // Where the stage's layers compute: "cpu", "cuda" or "auto"
  // (model/backend_factory.h LayerRangeFactoryFor), with `cuda`.
  std::string backend = "cpu";
  CudaOptions cuda;
};

struct PipelineStageResult {
  StagePlan plan;
  int window = 1;
  StageStats stats;
  // Stage 0's steps and progress; params: the servers' model once this
  // pipeline's stages all finished (stage 0 only).
  TrainResult train;
  int64_t pushes_dropped = 0;  // kServers: updates the servers did not apply
};

// The plan of `options` for `spec` and minibatches of `rows` rows:
// InvalidArgument when neither or an inconsistent stages / stage_plan is
// given, or the stage or depth do not fit it.
absl::StatusOr<StagePlan> PipelinePlan(const PipelineStageOptions& options,
                                       const ModelSpec& spec, int rows);

absl::StatusOr<PipelineStageResult> RunPipelineStage(
    const PipelineStageOptions& options, ParamClient* client,
    const ExampleSet* train, const ExampleSet* heldout,
    prometheus::Registry* registry, std::ostream* log);

}  // namespace asgd

#endif  // ASGD_WORKER_PIPELINE_PIPELINE_WORKER_H_
