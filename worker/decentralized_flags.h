// The flags of asgd_worker's decentralized modes (--mode=adpsgd,
// --mode=allreduce), defined once here: the workers serve each other a peer
// service (worker/peer/decentralized_worker.h); these say who averages with
// whom, where the peers are and how long to wait for them:
//   --topology, --topology_seed, --delay_by_one, --peer_host, --peer_port,
//   --peer_port_file, --peers, --peers_file, --peer_timeout_s,
//   --peer_finish_timeout_s
#ifndef ASGD_WORKER_DECENTRALIZED_FLAGS_H_
#define ASGD_WORKER_DECENTRALIZED_FLAGS_H_

#include "absl/status/status.h"
#include "worker/peer/decentralized_worker.h"

namespace asgd {

// Sets what these flags decide in *options: the adpsgd topology and
// delay_by_one, the peer service's host and port, the averaging and finish
// timeouts and resolve_peers (writing --peer_port_file, then --peers,
// --peers_file waited for up to options->connect_timeout, or this worker
// alone). Set options->num_workers and connect_timeout first.
// InvalidArgument for an unknown topology, or several workers without
// exactly one of --peers and --peers_file.
absl::Status ApplyDecentralizedFlags(DecentralizedWorkerOptions* options);

}  // namespace asgd

#endif  // ASGD_WORKER_DECENTRALIZED_FLAGS_H_
