// The flags of asgd_worker's parameter-server trainer (--mode=asgd, sync,
// sgd; worker/ps/trainer.h), defined once here: how gradients are
// accumulated per push, what runs while a push or a pull is on the wire,
// the shared pool's example order, the warm start and minibatches drawn
// ahead:
//   --push_every, --compute_while_pushing, --max_minibatches_per_push,
//   --overlap_pulls, --max_overlapped_steps, --pool_seed,
//   --warm_start_epochs, --prefetch_batches, --pool_run_id_file
#ifndef ASGD_WORKER_ASGD_FLAGS_H_
#define ASGD_WORKER_ASGD_FLAGS_H_

#include <string>

#include "absl/status/statusor.h"
#include "worker/ps/trainer.h"

namespace asgd {

// Sets those fields of *options from the flags (not the pool run id);
// compute_while_pushing and overlap_pulls only in asgd mode (set
// options->mode first). The trainer validates the values.
void AsgdTrainerFlags(TrainerOptions* options);

// The shared minibatch pool's run id, read from --pool_run_id_file
// (common/pool_run_id.h). InvalidArgument when the flag is not set, or
// the file's errors.
absl::StatusOr<std::string> PoolRunIdFromFlags();

}  // namespace asgd

#endif  // ASGD_WORKER_ASGD_FLAGS_H_
