#include "worker/consensus/consensus_worker.h"

#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "worker/consensus/consensus_metrics.h"

namespace asgd {

absl::StatusOr<ConsensusResult> RunConsensusWorker(
    ConsensusOptions options, float local_learning_rate,
    prometheus::Registry& registry, ParamClient* client, ModelBackend* backend,
    const ExampleSet* train, const ExampleSet* heldout, std::ostream* log) {
  ASGD_ASSIGN_OR_RETURN(
      options.learning_rate,
      LocalLearningRate(local_learning_rate, client->attributes()));
  ConsensusMetrics metrics(registry, options.loop.worker_index);
  options.observer = &metrics;
  ConsensusTrainer trainer(client, backend, train, heldout, options, log);
  ASGD_ASSIGN_OR_RETURN(ConsensusResult result, trainer.Run());
  LogSummary(log, options.loop.worker_index, result.train,
             absl::StrFormat(", mode %s: %d communications, %d server parts "
                             "not applied, last consensus distance %.4g",
                             ConsensusModeName(options.rule), result.rounds,
                             result.parts_dropped, result.last_distance));
  return result;
}

}  // namespace asgd
