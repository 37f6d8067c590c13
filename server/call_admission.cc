#include "server/call_admission.h"

namespace asgd {

bool CallAdmission::Enter() {
  if (limits_.total <= 0) {
    alive_.fetch_add(1, std::memory_order_acq_rel);
    return true;
  }
  int now = alive_.load(std::memory_order_acquire);
  do {
    if (now >= limits_.total) return false;
  } while (!alive_.compare_exchange_weak(now, now + 1,
                                         std::memory_order_acq_rel));
  return true;
}

void CallAdmission::Leave() { alive_.fetch_sub(1, std::memory_order_acq_rel); }

bool CallAdmission::Admit(CallKind kind, const std::string& address) {
  absl::MutexLock lock(&mu_);
  const std::pair<int, std::string> key(static_cast<int>(kind), address);
  if (limits_.per_peer > 0) {
    auto it = per_peer_.find(key);
    if (it != per_peer_.end() && it->second >= limits_.per_peer) return false;
  }
  ++per_peer_[key];
  ++open_[static_cast<int>(kind)];
  return true;
}

void CallAdmission::Release(CallKind kind, const std::string& address) {
  absl::MutexLock lock(&mu_);
  auto it = per_peer_.find(std::pair<int, std::string>(static_cast<int>(kind),
                                                       address));
  if (it == per_peer_.end()) return;
  if (--it->second <= 0) per_peer_.erase(it);
  --open_[static_cast<int>(kind)];
}

int CallAdmission::open(CallKind kind) const {
  absl::MutexLock lock(&mu_);
  return open_[static_cast<int>(kind)];
}

int CallAdmission::addresses() const {
  absl::MutexLock lock(&mu_);
  absl::flat_hash_map<std::string, int> seen;
  for (const auto& [key, count] : per_peer_) seen[key.second] += count;
  return static_cast<int>(seen.size());
}

std::string PeerAddress(const std::string& peer) {
  const size_t colon = peer.rfind(':');
  const size_t bracket = peer.rfind(']');
  if (colon == std::string::npos ||
      (bracket != std::string::npos && colon < bracket)) {
    return peer;
  }
  return peer.substr(0, colon);
}

}  // namespace asgd
