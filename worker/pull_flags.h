// asgd_worker's pull flags (defined in pull_flags.cc):
//   --delta_pulls, --replay_threads, --replay_on_device
// They decide how a worker's client brings its model up to date: the
// compressed updates since its exact copy, replayed on its CPU (split over
// --replay_threads threads per server) or, with --replay_on_device, on the
// GPU that trains (the copies kept in its memory), or the weights.
#ifndef ASGD_WORKER_PULL_FLAGS_H_
#define ASGD_WORKER_PULL_FLAGS_H_

#include <string>

#include "absl/status/status.h"
#include "model/backend.h"
#include "worker/ps/param_client.h"

namespace asgd {

// Sets o->delta_pulls and o->replay_threads from the flags (the client
// refuses a thread count outside [0, 64] when it connects).
void PullOptionsFromFlags(PoolClientOptions* o);

// With --replay_on_device: `client` keeps its exact copies on `backend`'s
// device (ParamClient::KeepExactCopiesOn with backend->CreateExactCopy);
// nothing without it. InvalidArgument for a backend that keeps no copies
// (the CPU backend) or a client without delta pulls, naming the flags; the
// backend's errors (ResourceExhausted without the device memory). `backend`
// must outlive the client's pulls.
absl::Status ReplayOnDeviceFromFlags(ModelBackend* backend,
                                     ParamClient* client);

// The end of a worker's summary line about its delta pulls, e.g.
// ", delta pulls: 812 of updates (35.2 MB), 2 with weights, replayed on the
// device (plans 40.1 MB)"; empty when no pull brought updates and the
// copies are on the host (e.g. float32 pushes, which servers cannot replay).
std::string DeltaPullSummary(const ParamClient& client);

}  // namespace asgd

#endif  // ASGD_WORKER_PULL_FLAGS_H_
