#include "worker/decentralized_flags.h"

#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "common/cli.h"
#include "common/status_macros.h"
#include "worker/peer/adpsgd_topology.h"

ABSL_FLAG(std::string, topology, "fixed_ring",
          "adpsgd: who averages with whom: fixed_ring (every step with the "
          "next worker on the ring) or random_ring (a fresh random pairing "
          "every step, from --topology_seed and the step number).");
ABSL_FLAG(uint64_t, topology_seed, 1,
          "adpsgd random_ring: seed of the pairings; the same on every worker.");
ABSL_FLAG(bool, delay_by_one, false,
          "adpsgd: compute each gradient on the previous iteration's weights, "
          "so the averaging runs entirely beside the computation.");
ABSL_FLAG(std::string, peer_host, "0.0.0.0",
          "adpsgd/allreduce: address the peer service listens on.");
ABSL_FLAG(int, peer_port, 0,
          "adpsgd/allreduce: port of this worker's peer service; 0 picks a "
          "free one (printed, and written to --peer_port_file).");
ABSL_FLAG(std::string, peer_port_file, "",
          "adpsgd/allreduce: write the peer port here once listening.");
ABSL_FLAG(std::string, peers, "",
          "adpsgd/allreduce: every worker's peer address host:port, "
          "comma-separated, in worker-index order (this worker's included).");
ABSL_FLAG(std::string, peers_file, "",
          "adpsgd/allreduce, instead of --peers: wait (up to "
          "--connect_timeout_s) until this file lists every worker's peer "
          "address (comma- or newline-separated, in worker-index order). A "
          "launcher writes it, atomically, once every --peer_port_file exists.");
ABSL_FLAG(double, peer_timeout_s, 5,
          "adpsgd: deadline of one averaging exchange; a slow or dead peer is "
          "skipped for that step and backed off. allreduce waits for its "
          "neighbours up to --rpc_timeout_s.");
ABSL_FLAG(double, peer_finish_timeout_s, 1800,
          "adpsgd/allreduce: at the end, wait at most this long for the other "
          "workers to finish (they may still average with this one); then "
          "worker 0 hands its model to the servers.");

namespace asgd {

absl::Status ApplyDecentralizedFlags(DecentralizedWorkerOptions* o) {
  ASGD_ASSIGN_OR_RETURN(o->decentralized.adpsgd.topology,
                        ParseTopology(absl::GetFlag(FLAGS_topology)));
  const std::string peers = absl::GetFlag(FLAGS_peers);
  const std::string peers_file = absl::GetFlag(FLAGS_peers_file);
  const int num_workers = o->num_workers;
  if (num_workers > 1 && peers.empty() == peers_file.empty()) {
    return absl::InvalidArgumentError(
        "--mode=adpsgd/allreduce with several workers needs exactly one of "
        "--peers and --peers_file");
  }
  o->decentralized.delay_by_one = absl::GetFlag(FLAGS_delay_by_one);
  o->decentralized.adpsgd.topology_seed = absl::GetFlag(FLAGS_topology_seed);
  o->peer_host = absl::GetFlag(FLAGS_peer_host);
  o->peer_port = absl::GetFlag(FLAGS_peer_port);
  o->average_timeout = absl::Seconds(absl::GetFlag(FLAGS_peer_timeout_s));
  o->finish_timeout =
      absl::Seconds(absl::GetFlag(FLAGS_peer_finish_timeout_s));
  o->resolve_peers =
      [peers, peers_file, num_workers, host = o->peer_host,
       timeout = o->connect_timeout,
       port_file = absl::GetFlag(FLAGS_peer_port_file)](
          int port) -> absl::StatusOr<std::vector<std::string>> {
    WritePortFile(port_file, port);
    if (!peers.empty()) return ParsePeerList(peers);
    if (!peers_file.empty()) {
      return WaitForPeersFile(peers_file, num_workers, timeout);
    }
    return std::vector<std::string>{absl::StrCat(host, ":", port)};
  };
  return absl::OkStatus();
}

}  // namespace asgd
