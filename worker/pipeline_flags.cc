#include "worker/pipeline_flags.h"

#include <string>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "worker/backend_flags.h"

ABSL_FLAG(int, stages, 0,
          "--mode=pipeline: the number of stages, the model's layers split "
          "among them balanced by training work (0: as --stage_plan says).");
ABSL_FLAG(std::string, stage_plan, "",
          "--mode=pipeline: the layers of each stage, e.g. 0-1,2,3 (layer i "
          "is hidden layer i, the last the output layer; each stage a layer "
          "or a range, in order, together all layers). Empty: balanced over "
          "--stages. Every stage of a run must get the same plan.");
ABSL_FLAG(int, stage, 0,
          "--mode=pipeline: this process's stage, in [0, stages). Stage 0 "
          "reads the data; the last computes the loss.");
ABSL_FLAG(int, pipeline_depth, 0,
          "--mode=pipeline: minibatches stage 0 keeps in flight, in [1, "
          "stages]; stage s then updates max(0, depth - 1 - s) updates "
          "late. 1: no pipelining (plain SGD, one stage busy at a time); 0: "
          "the number of stages (every stage busy).");
ABSL_FLAG(std::string, pipeline_weights, "local",
          "--mode=pipeline: local (each stage trains its own layers and "
          "writes them into the servers' model at the end) or servers (every "
          "update goes to the servers as it is made, and --num_workers "
          "pipelines, each with its own stages and part of the data, train "
          "the servers' model together).");
ABSL_FLAG(int, pipeline_pull_every, 4,
          "--mode=pipeline --pipeline_weights=servers: updates between two "
          "pulls of the servers' weights.");
ABSL_FLAG(int, stage_port, 0,
          "--mode=pipeline, stages > 0: the port this stage listens on for "
          "the previous stage (0: a free port, logged).");
ABSL_FLAG(std::string, next_stage, "",
          "--mode=pipeline, every stage but the last: host:port of the next "
          "stage.");

namespace asgd {

absl::Status ApplyPipelineFlags(int num_workers,
                                PipelineStageOptions* options) {
  options->backend = BackendFromFlags();
  ASGD_ASSIGN_OR_RETURN(options->cuda, CudaOptionsFromFlags());
  options->stages = absl::GetFlag(FLAGS_stages);
  options->stage_plan = absl::GetFlag(FLAGS_stage_plan);
  options->stage = absl::GetFlag(FLAGS_stage);
  options->depth = absl::GetFlag(FLAGS_pipeline_depth);
  options->stage_port = absl::GetFlag(FLAGS_stage_port);
  options->next_stage = absl::GetFlag(FLAGS_next_stage);
  const std::string weights = absl::GetFlag(FLAGS_pipeline_weights);
  if (weights == "local") {
    options->weights = PipelineWeights::kLocal;
  } else if (weights == "servers") {
    options->weights = PipelineWeights::kServers;
  } else {
    return absl::InvalidArgumentError(absl::StrCat(
        "--pipeline_weights=", weights, ": want local or servers"));
  }
  if (num_workers != 1 && options->weights == PipelineWeights::kLocal) {
    return absl::InvalidArgumentError(
        "--mode=pipeline --pipeline_weights=local runs one pipeline: give "
        "each stage --stage, not --num_workers (several pipelines train "
        "together with --pipeline_weights=servers)");
  }
  options->pull_every = absl::GetFlag(FLAGS_pipeline_pull_every);
  if (options->pull_every < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--pipeline_pull_every=", options->pull_every, " must be >= 1"));
  }
  if (options->stages < 0 || options->stages > 64) {
    return absl::InvalidArgumentError(
        absl::StrCat("--stages=", options->stages, " must be in [0, 64]"));
  }
  if (options->stages == 0 && options->stage_plan.empty()) {
    return absl::InvalidArgumentError(
        "--mode=pipeline needs --stages=N or --stage_plan");
  }
  if (options->stage < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--stage=", options->stage, " must be >= 0"));
  }
  if (options->depth < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--pipeline_depth=", options->depth, " must be >= 0"));
  }
  if (options->stage_port < 0 || options->stage_port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--stage_port=", options->stage_port, " must be in [0, 65535]"));
  }
  return absl::OkStatus();
}

}  // namespace asgd
