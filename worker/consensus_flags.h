// The flags of asgd_worker's consensus modes (--mode=easgd, --mode=admm),
// defined once here: how often a worker communicates with the servers'
// consensus and how strongly it is pulled toward it
// (worker/consensus/consensus_trainer.h):
//   --consensus_every, --elastic_alpha, --admm_rho
#ifndef ASGD_WORKER_CONSENSUS_FLAGS_H_
#define ASGD_WORKER_CONSENSUS_FLAGS_H_

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "worker/consensus/consensus_trainer.h"

namespace asgd {

// Sets the rule (from `mode`: easgd or admm), tau, alpha (0: 0.9 /
// num_workers, the EASGD paper's choice of a total elastic force of 0.9)
// and rho in *options. InvalidArgument naming the flag for a value out of
// range.
absl::Status ApplyConsensusFlags(absl::string_view mode, int num_workers,
                                 ConsensusOptions* options);

}  // namespace asgd

#endif  // ASGD_WORKER_CONSENSUS_FLAGS_H_
