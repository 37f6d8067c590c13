// RunConsensusWorker: one worker of a consensus run (asgd_worker
// --mode=easgd or --mode=admm) from start to end: the local learning rate
// (given, or the pool's "learning_rate" attribute), the consensus metrics
// (consensus_metrics.h) in `registry`, the trainer (consensus_trainer.h),
// and the summary lines of worker/loop/loop.h, the done line ending
//   ", mode easgd: 120 communications, 0 server parts not applied,
//    last consensus distance 0.31"
//
// Thread-safety: call from one thread.
#ifndef ASGD_WORKER_CONSENSUS_CONSENSUS_WORKER_H_
#define ASGD_WORKER_CONSENSUS_CONSENSUS_WORKER_H_

#include <ostream>

#include "absl/status/statusor.h"
#include "model/backend.h"
#include "prometheus/registry.h"
#include "worker/consensus/consensus_trainer.h"
#include "worker/data/examples.h"
#include "worker/ps/param_client.h"

namespace asgd {

// `options` as the flags set them (its learning_rate and observer are set
// here); `local_learning_rate` 0: the pool's. FailedPrecondition when no
// learning rate is usable; else the trainer's result or error.
absl::StatusOr<ConsensusResult> RunConsensusWorker(
    ConsensusOptions options, float local_learning_rate,
    prometheus::Registry& registry, ParamClient* client, ModelBackend* backend,
    const ExampleSet* train, const ExampleSet* heldout, std::ostream* log);

}  // namespace asgd

#endif  // ASGD_WORKER_CONSENSUS_CONSENSUS_WORKER_H_
