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
// Logs, besides the trainer's lines, at the end (lines wrapped here):
//   worker 1 done: 500 steps, 0 pushes, 128000 frames in 10.2 s
//       (12549 frames/s), mode adpsgd
//   worker 1 phases: data 0.2 s, pull 0.0 s, compute 7.9 s, push 1.1 s,
//       idle 0.0 s; blocked on communication 12% of step time
//   worker 1 peers: 500 averages started (0 failed, 0 skipped),
//       498 answered, last consensus distance 0.21
//   worker 1 held-out frame accuracy: 75.0%
// "push" is the time blocked on peers; "pushes" count those to the
// parameter servers: none.
//
// Thread-safety: call from one thread; uses `servers` and `backend` only from
// it.
#ifndef ASGD_WORKER_DECENTRALIZED_WORKER_H_
#define ASGD_WORKER_DECENTRALIZED_WORKER_H_

#include <functional>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/chunking.h"
#include "common/grpc_security.h"
#include "worker/decentralized_trainer.h"
#include "worker/dnn.h"
#include "worker/frames.h"
#include "worker/param_client.h"
#include "worker/trainer.h"

namespace asgd {

struct DecentralizedWorkerOptions {
  // worker_index, batch_size, max_steps, epochs, slowdown, logging and
  // evaluation, seed, observer; local_learning_rate is the SGD step (0: the
  // servers' "learning_rate" attribute).
  TrainerOptions train;
  // mode, delay_by_one, adpsgd topology and back-off, allreduce_timeout,
  // peer_observer (learning_rate is taken from `train`).
  DecentralizedOptions decentralized;
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
    DnnBackend* backend, const FrameData* train, const FrameData* heldout,
    std::ostream* log);

// "host:port,host:port" or one per line. InvalidArgument when malformed.
absl::StatusOr<std::vector<std::string>> ParsePeerList(const std::string& text);

// Waits until `path` holds exactly `num_workers` peer addresses (a launcher
// writes it atomically, e.g. temporary file and rename), polling; then
// returns them. DeadlineExceeded after `timeout`, with what was wrong.
absl::StatusOr<std::vector<std::string>> WaitForPeersFile(
    const std::string& path, int num_workers, absl::Duration timeout);

// Steps per worker when every worker must run the same number (allreduce):
// `epochs` passes over `total_frames` shared by `num_workers` workers in
// batches of `batch_size`; at least 1.
int64_t LockstepSteps(double epochs, int64_t total_frames, int num_workers,
                      int batch_size);

}  // namespace asgd

#endif  // ASGD_WORKER_DECENTRALIZED_WORKER_H_
