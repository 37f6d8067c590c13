// The flags of asgd_worker's pipeline mode (--mode=pipeline), defined once
// here: which stage this process is, how the model's layers are split and
// how deep the pipeline runs, and where the neighbouring stages are
// (worker/pipeline/pipeline_worker.h):
//   --stages, --stage_plan, --stage, --pipeline_depth, --pipeline_weights,
//   --pipeline_pull_every, --stage_port, --next_stage
#ifndef ASGD_WORKER_PIPELINE_FLAGS_H_
#define ASGD_WORKER_PIPELINE_FLAGS_H_

#include "absl/status/status.h"
#include "worker/pipeline/pipeline_worker.h"

namespace asgd {

// Sets the stage, plan, depth, weights, port, next stage and backend
// (--backend, --cuda_device, --cuda_math: worker/backend_flags.h) of
// *options from the flags. InvalidArgument naming the flag for a value out
// of range (the plan itself is checked against the model once connected:
// PipelinePlan, and the backend when the stage makes its layers), or for
// `num_workers` > 1 with local weights.
absl::Status ApplyPipelineFlags(int num_workers,
                                PipelineStageOptions* options);

}  // namespace asgd

#endif  // ASGD_WORKER_PIPELINE_FLAGS_H_
