// asgd_worker's pull flags (defined in pull_flags.cc):
//   --delta_pulls, --replay_threads
// They decide how a worker's client brings its model up to date: the
// compressed updates since its exact copy, replayed on its CPU (split over
// --replay_threads threads per server), or the weights.
#ifndef ASGD_WORKER_PULL_FLAGS_H_
#define ASGD_WORKER_PULL_FLAGS_H_

#include "worker/ps/param_client.h"

namespace asgd {

// Sets o->delta_pulls and o->replay_threads from the flags (the client
// refuses a thread count outside [0, 64] when it connects).
void PullOptionsFromFlags(PoolClientOptions* o);

}  // namespace asgd

#endif  // ASGD_WORKER_PULL_FLAGS_H_
