#include "common/refusal.h"

#include "common/grpc_status.h"
#include "gtest/gtest.h"

namespace asgd {
namespace {

TEST(RefusalTest, TravelsWithTheStatusWhateverItsMessage) {
  for (Refusal r :
       {Refusal::kBusy, Refusal::kPushMemory, Refusal::kPeerLimit,
        Refusal::kServerLimit}) {
    const absl::Status s =
        WithRefusal(absl::UnavailableError("any wording at all"), r);
    EXPECT_EQ(RefusalOf(s), r);
    EXPECT_EQ(ParseRefusal(RefusalName(r)), r);
    // Rewrapping the message keeps it when the payloads are copied.
    absl::Status copy(s.code(), "server 1: another text");
    s.ForEachPayload([&](absl::string_view url, const absl::Cord& payload) {
      copy.SetPayload(url, payload);
    });
    EXPECT_EQ(RefusalOf(copy), r);
  }
  EXPECT_EQ(RefusalOf(absl::UnavailableError("server busy")), Refusal::kNone);
  EXPECT_EQ(RefusalOf(absl::OkStatus()), Refusal::kNone);
  EXPECT_EQ(ParseRefusal("SOMETHING_NEW"), Refusal::kNone);
  // OK stays OK.
  EXPECT_TRUE(WithRefusal(absl::OkStatus(), Refusal::kBusy).ok());
}

TEST(RefusalTest, CodesSurviveTheGrpcConversion) {
  const absl::Status s =
      WithRefusal(absl::UnavailableError("x"), Refusal::kPeerLimit);
  const grpc::Status g = ToGrpcStatus(s, nullptr);
  EXPECT_EQ(g.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(FromGrpcStatus(g).code(), absl::StatusCode::kUnavailable);
}

}  // namespace
}  // namespace asgd
