#include "server/call_admission.h"

namespace asgd {

Entry CallAdmission::Enter(const std::string& address) {
  absl::MutexLock lock(&mu_);
  if (limits_.total > 0 &&
      alive_.load(std::memory_order_relaxed) >= limits_.total) {
    return Entry::kServerFull;
  }
  int& from_address = alive_per_address_[address];
  if (limits_.per_address_alive > 0 &&
      from_address >= limits_.per_address_alive) {
    return Entry::kAddressFull;  // from_address > 0: the entry stays
  }
  ++from_address;
  alive_.fetch_add(1, std::memory_order_acq_rel);
  return Entry::kEntered;
}

void CallAdmission::Leave(const std::string& address) {
  absl::MutexLock lock(&mu_);
  auto it = alive_per_address_.find(address);
  if (it == alive_per_address_.end()) return;
  if (--it->second <= 0) alive_per_address_.erase(it);
  alive_.fetch_sub(1, std::memory_order_acq_rel);
}

int CallAdmission::alive(const std::string& address) const {
  absl::MutexLock lock(&mu_);
  auto it = alive_per_address_.find(address);
  return it == alive_per_address_.end() ? 0 : it->second;
}

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
