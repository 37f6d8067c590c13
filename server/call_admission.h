// CallAdmission: how many calls one client address, and all clients
// together, may have in flight on a parameter server. Every RPC and stream
// goes through it before the server does any work for it (no gRPC here; the
// adapter, grpc_service.cc, asks it).
//
// Three bounds:
//  * per address and kind (`per_peer`): pushes (a Push call or a PushStream),
//    pull streams, per-call pulls and other calls (DescribeModel,
//    FetchBatches) in flight from one client IP (any port). A call holds its
//    place from Admit() until Release(), when its status is sent (a client
//    that calls again as soon as it has its answer finds its place free);
//    a pull that did not end OK holds it until gRPC is done with the call.
//  * all clients together (`total`): calls alive, from Enter() (the reactor
//    is made) to Leave() (gRPC is done with it, OnDone). A call the server
//    has finished still holds memory until gRPC releases it (for instance
//    its last message, queued for a client that does not read), so this
//    bound counts until then, and is what bounds the server's memory when
//    clients come from many addresses.
//  * calls alive from one address (`per_address_alive`), counted like
//    `total`: a call whose status was sent holds no place of its kind, but
//    until gRPC is done with it it is still alive, so calls opened and reset
//    as fast as a client can (HTTP/2 "rapid reset") could otherwise fill
//    every `total` place from one address, and every other client would be
//    refused until the server had retired them. With it, one address holds
//    at most its share and the others are admitted as before.
// Refused calls are not counted by any: a burst of refused calls costs the
// server a refusal each and holds nothing.
//
//   CallAdmission admission({.per_peer = 16, .total = 512,
//                            .per_address_alive = 128});
//   const std::string address = PeerAddress(context->peer());
//   switch (admission.Enter(address)) ... refuse on kServerFull (SERVER_LIMIT)
//                                     ... or kAddressFull (PEER_LIMIT)
//   if (!admission.Admit(CallKind::kPullStream, address)) ... PEER_LIMIT
//   ... admission.Release(kind, address) when the status is sent,
//   ... admission.Leave(address) in OnDone.
//
// Thread-safety: thread-safe.
#ifndef ASGD_SERVER_CALL_ADMISSION_H_
#define ASGD_SERVER_CALL_ADMISSION_H_

#include <array>
#include <atomic>
#include <string>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"

namespace asgd {

// What a call counts against, per client address.
enum class CallKind { kPush = 0, kPullStream, kOther };
inline constexpr int kNumCallKinds = 3;

struct CallLimits {
  // Calls of one kind in flight from one address; 0: no limit.
  int per_peer = 16;
  // Calls alive on the server; 0: no limit.
  int total = 512;
  // Calls alive from one address; 0: no limit.
  int per_address_alive = 128;
};

// Enter()'s answer.
enum class Entry {
  kEntered,
  kServerFull,   // `total` calls alive
  kAddressFull,  // `per_address_alive` calls alive from this address
};

class CallAdmission {
 public:
  explicit CallAdmission(CallLimits limits) : limits_(limits) {}

  // A call from `address` is made: kEntered (counted), or why it is refused
  // (not counted).
  Entry Enter(const std::string& address);
  // gRPC is done with a call from `address` that Enter() counted.
  void Leave(const std::string& address);

  // A place among `address`'s calls of `kind`: false (not counted) when it
  // has per_peer of them in flight.
  bool Admit(CallKind kind, const std::string& address);
  // Gives back a place that Admit() gave.
  void Release(CallKind kind, const std::string& address);

  // Calls of `kind` admitted and not released, from every address.
  int open(CallKind kind) const;
  // Calls alive (Enter() without Leave()).
  int alive() const { return alive_.load(std::memory_order_acquire); }
  // Calls alive from `address`.
  int alive(const std::string& address) const;
  // Addresses with a call admitted now.
  int addresses() const;

  const CallLimits& limits() const { return limits_; }

 private:
  const CallLimits limits_;
  std::atomic<int> alive_{0};
  mutable absl::Mutex mu_;
  // Calls in flight per (kind, address); entries at 0 are erased.
  absl::flat_hash_map<std::pair<int, std::string>, int> per_peer_
      ABSL_GUARDED_BY(mu_);
  std::array<int, kNumCallKinds> open_ ABSL_GUARDED_BY(mu_) = {};
  // Calls alive per address; entries at 0 are erased. alive_ is their sum,
  // written under mu_ and readable without it.
  absl::flat_hash_map<std::string, int> alive_per_address_ ABSL_GUARDED_BY(mu_);
};

// The client address of a gRPC peer string without its port
// ("ipv4:10.0.0.7:51234" -> "ipv4:10.0.0.7", "ipv6:[::1]:5" -> "ipv6:[::1]").
std::string PeerAddress(const std::string& peer);

}  // namespace asgd

#endif  // ASGD_SERVER_CALL_ADMISSION_H_
