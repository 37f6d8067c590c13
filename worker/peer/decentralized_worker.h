// RunDecentralizedWorker: one worker of a decentralized run (asgd_worker
// --mode=adpsgd or --mode=allreduce) from start to end.
//
//  1. Pulls the initial model once from the parameter servers, so every
//     worker starts from the same weights the other modes start from.
//  2. Serves the Peer service (peer_grpc_service.h) on peer_host:peer_port
//     (0: a free port) with that model (adpsgd) or an allreduce mailbox.
//  3. Learns every worker's peer address from resolve_peers(port) and checks
//     with each that they form one group (GrpcPeerClient::Create): the start
//     barrier; each waits up to connect_timeout for the others.
//  4. Trains (DecentralizedTrainer).
//  5. Marks itself done and waits until every other worker is done too (at
//     most finish_timeout; a worker that is gone counts as done), still
//     answering averages meanwhile, so the final models include them.
//  6. Worker 0 hands its final model to the servers (an assign push, as
//     --mode=sgd does), so `asgd_eval --servers` evaluates a decentralized
//     run exactly like the others; every worker evaluates its own final
//     model on the held-out data.
//
// Peer discovery: resolve_peers gets this worker's port once it listens and
// returns all workers' addresses in worker-index order. asgd_worker either
// takes them from --peers (fixed ports, e.g. Kubernetes) or writes its port
// to --peer_port_file and waits for a --peers_file that the launching script
// writes once every worker's port file exists (WaitForPeersFile).
//
// Logs, besides the trainer's lines, the summary of worker/loop/loop.h
// (LogSummary, its done line ending ", mode adpsgd"), after a line such as
//   worker 1 peers: 500 averages started (0 failed, 0 skipped),
//       498 answered, last consensus distance 0.21
// "push" is the time blocked on peers; "pushes" count those to the
// parameter servers: none.
//
// Thread-safety: call from one thread; uses `servers` and `backend` only from
// it.
#ifndef ASGD_WORKER_PEER_DECENTRALIZED_WORKER_H_
#define ASGD_WORKER_PEER_DECENTRALIZED_WORKER_H_

#include <functional>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/chunking.h"
#include "common/security_options.h"
#include "model/backend.h"
#include "worker/data/examples.h"
#include "worker/peer/decentralized_trainer.h"
#include "worker/ps/param_client.h"

namespace asgd {

struct DecentralizedWorkerOptions {
  // The loop, mode, delay_by_one, adpsgd topology and back-off,
  // allreduce_timeout, peer_observer. Its learning_rate is set from
  // local_learning_rate below.
  DecentralizedOptions decentralized;
  // The SGD step; 0: the servers' "learning_rate" attribute.
  float local_learning_rate = 0;
  int num_workers = 1;
  std::string peer_host = "0.0.0.0";
  int peer_port = 0;
  SecurityOptions security;  // peer connections, as for the servers
  absl::Duration connect_timeout = absl::Seconds(60);
  absl::Duration average_timeout = absl::Seconds(5);
  absl::Duration send_timeout = absl::Seconds(60);
  absl::Duration finish_timeout = absl::Minutes(30);
  int64_t max_chunk_elements = kDefaultMaxChunkElements;
  // Given the port this worker's peer service listens on, every worker's
  // peer address (host:port) in worker-index order. Called once, as soon as
  // the port is known (also for a single worker, whose answer is not used);
  // required for several workers.
  std::function<absl::StatusOr<std::vector<std::string>>(int port)>
      resolve_peers;
};

struct DecentralizedWorkerResult {
  DecentralizedResult run;       // run.train.params: the final local model
  int64_t averages_served = 0;   // exchanges other workers started
  std::vector<int> unconfirmed;  // workers not known to be done at the end
  double heldout_accuracy = -1;  // of the final local model
};

absl::StatusOr<DecentralizedWorkerResult> RunDecentralizedWorker(
    const DecentralizedWorkerOptions& options, ParamClient* servers,
    ModelBackend* backend, const ExampleSet* train, const ExampleSet* heldout,
    std::ostream* log);

// "host:port,host:port" or one per line. InvalidArgument when malformed.
absl::StatusOr<std::vector<std::string>> ParsePeerList(const std::string& text);

// Waits until `path` holds exactly `num_workers` peer addresses (a launcher
// writes it atomically, e.g. temporary file and rename), polling; then
// returns them. DeadlineExceeded after `timeout`, with what was wrong.
absl::StatusOr<std::vector<std::string>> WaitForPeersFile(
    const std::string& path, int num_workers, absl::Duration timeout);

}  // namespace asgd

#endif  // ASGD_WORKER_PEER_DECENTRALIZED_WORKER_H_
