#include "common/refusal.h"

#include <string>

#include "absl/strings/cord.h"

namespace asgd {
namespace {

constexpr char kPayloadUrl[] = "type.googleapis.com/asgd.v1.Refusal";

constexpr Refusal kAll[] = {Refusal::kBusy, Refusal::kPushMemory,
                            Refusal::kPeerLimit, Refusal::kServerLimit};

}  // namespace

absl::string_view RefusalName(Refusal refusal) {
  switch (refusal) {
    case Refusal::kNone:
      break;
    case Refusal::kBusy:
      return "BUSY";
    case Refusal::kPushMemory:
      return "PUSH_MEMORY";
    case Refusal::kPeerLimit:
      return "PEER_LIMIT";
    case Refusal::kServerLimit:
      return "SERVER_LIMIT";
  }
  return "REFUSAL_UNSPECIFIED";
}

Refusal ParseRefusal(absl::string_view name) {
  for (Refusal r : kAll) {
    if (RefusalName(r) == name) return r;
  }
  return Refusal::kNone;
}

absl::Status WithRefusal(absl::Status status, Refusal refusal) {
  if (!status.ok() && refusal != Refusal::kNone) {
    status.SetPayload(kPayloadUrl, absl::Cord(RefusalName(refusal)));
  }
  return status;
}

Refusal RefusalOf(const absl::Status& status) {
  const auto payload = status.GetPayload(kPayloadUrl);
  if (!payload.has_value()) return Refusal::kNone;
  return ParseRefusal(std::string(*payload));
}

}  // namespace asgd
