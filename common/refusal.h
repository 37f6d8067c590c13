// Refusals: the machine-readable reason why a server turned a call down
// before doing anything with it (the model is unchanged), so that clients
// decide how to retry from the status code and this reason, never from the
// message text. On the wire it is asgd.v1.Refusal, sent as the trailing
// metadata "asgd-refusal" with the enum value's name (proto/asgd.proto);
// inside a process it travels as a payload of the absl::Status, which
// common/grpc_status.h converts in both directions.
//
//   return WithRefusal(absl::UnavailableError("server busy: ..."),
//                      Refusal::kBusy);
//   ...
//   if (RefusalOf(status) != Refusal::kNone) { /* overload: retry later */ }
//
// Thread-safety: pure functions.
#ifndef ASGD_COMMON_REFUSAL_H_
#define ASGD_COMMON_REFUSAL_H_

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace asgd {

// Values and names match asgd.v1.Refusal.
enum class Refusal {
  kNone = 0,        // REFUSAL_UNSPECIFIED: not a refusal
  kBusy = 1,        // BUSY: the apply queues are full
  kPushMemory = 2,  // PUSH_MEMORY: the memory for pushes in flight is in use
  kPeerLimit = 3,   // PEER_LIMIT: this client has too many calls in flight
  kServerLimit = 4,  // SERVER_LIMIT: the server has too many calls in flight
};

// The trailing-metadata key that carries a refusal on the wire.
inline constexpr char kRefusalMetadataKey[] = "asgd-refusal";

// "BUSY", "PUSH_MEMORY", "PEER_LIMIT", "SERVER_LIMIT"; "REFUSAL_UNSPECIFIED"
// for kNone.
absl::string_view RefusalName(Refusal refusal);
// The inverse of RefusalName; kNone for any other text.
Refusal ParseRefusal(absl::string_view name);

// `status` (not OK) marked with `refusal`.
absl::Status WithRefusal(absl::Status status, Refusal refusal);
// The refusal `status` carries, or kNone.
Refusal RefusalOf(const absl::Status& status);

}  // namespace asgd

#endif  // ASGD_COMMON_REFUSAL_H_
