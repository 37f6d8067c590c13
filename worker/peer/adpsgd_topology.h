// Who averages with whom in AD-PSGD (asgd_worker --mode=adpsgd), decided by
// every worker on its own from (topology, seed, step): no coordinator.
//
//  * kFixedRing: at every step worker i averages with its right neighbour
//    i + 1 (mod n), so each worker takes part in two exchanges per step (one
//    it starts, one its left neighbour starts). With two workers the pair
//    would pick each other: only worker 0 starts.
//  * kRandomRing: at step t every worker derives the same random ring, a
//    permutation p of the workers from SplitMix64(seed, t), and pairs its
//    consecutive positions (p0, p1), (p2, p3), ...: a perfect matching of
//    the workers for an even count; for an odd count the last one, p[n-1],
//    sits the step out (which one changes from step to step). The first of
//    each pair starts the exchange. The step's mixing matrix
//    W = I - sum over pairs (e_i - e_j)(e_i - e_j)^T / 2 is symmetric and
//    doubly stochastic.
//
// Workers run at their own pace, so at a given moment they are at different
// steps and may start exchanges that another worker's step would not; the
// exchange itself stays correct (see peer_model.h).
//
// Thread-safety: pure functions.
#ifndef ASGD_WORKER_PEER_ADPSGD_TOPOLOGY_H_
#define ASGD_WORKER_PEER_ADPSGD_TOPOLOGY_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace asgd {

enum class Topology { kFixedRing, kRandomRing };

// "fixed_ring" or "random_ring"; InvalidArgument otherwise.
absl::StatusOr<Topology> ParseTopology(absl::string_view text);
std::string TopologyName(Topology topology);

// The random ring of step `step`: a permutation of [0, num_workers), the same
// on every machine and compiler (no std:: distributions).
std::vector<int> RandomRing(int num_workers, uint64_t seed, uint64_t step);

// The matching of the random ring at `step`: every worker's partner, or -1
// for the one that sits out (odd counts); partner[partner[i]] == i.
std::vector<int> RandomRingMatching(int num_workers, uint64_t seed,
                                    uint64_t step);

// The worker `worker` starts an exchange with at `step`, or -1.
int ExchangePartner(Topology topology, int num_workers, uint64_t seed,
                    uint64_t step, int worker);

}  // namespace asgd

#endif  // ASGD_WORKER_PEER_ADPSGD_TOPOLOGY_H_
