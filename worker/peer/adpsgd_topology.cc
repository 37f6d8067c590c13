#include "worker/peer/adpsgd_topology.h"

#include <algorithm>
#include <numeric>
#include <utility>

#include "absl/strings/str_cat.h"

namespace asgd {
namespace {

uint64_t SplitMix64(uint64_t* state) {
  uint64_t z = (*state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

}  // namespace

absl::StatusOr<Topology> ParseTopology(absl::string_view text) {
  if (text == "fixed_ring") return Topology::kFixedRing;
  if (text == "random_ring") return Topology::kRandomRing;
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown topology '", text, "' (want fixed_ring or random_ring)"));
}

std::string TopologyName(Topology topology) {
  return topology == Topology::kFixedRing ? "fixed_ring" : "random_ring";
}

std::vector<int> RandomRing(int num_workers, uint64_t seed, uint64_t step) {
  std::vector<int> ring(std::max(num_workers, 0));
  std::iota(ring.begin(), ring.end(), 0);
  uint64_t state = seed;
  state = SplitMix64(&state) ^ step;
  for (int i = num_workers - 1; i > 0; --i) {
    const int j = static_cast<int>(SplitMix64(&state) % (i + 1));
    std::swap(ring[i], ring[j]);
  }
  return ring;
}

std::vector<int> RandomRingMatching(int num_workers, uint64_t seed,
                                    uint64_t step) {
  std::vector<int> partner(std::max(num_workers, 0), -1);
  const std::vector<int> ring = RandomRing(num_workers, seed, step);
  for (int k = 0; k + 1 < num_workers; k += 2) {
    partner[ring[k]] = ring[k + 1];
    partner[ring[k + 1]] = ring[k];
  }
  return partner;
}

int ExchangePartner(Topology topology, int num_workers, uint64_t seed,
                    uint64_t step, int worker) {
  if (num_workers < 2 || worker < 0 || worker >= num_workers) return -1;
  if (topology == Topology::kFixedRing) {
    if (num_workers == 2 && worker == 1) return -1;
    return (worker + 1) % num_workers;
  }
  const std::vector<int> ring = RandomRing(num_workers, seed, step);
  for (int k = 0; k + 1 < num_workers; k += 2) {
    if (ring[k] == worker) return ring[k + 1];
  }
  return -1;
}

}  // namespace asgd
