#include "corpus/phone_set.h"

#include <set>

#include "gtest/gtest.h"

namespace asgd::corpus {
namespace {

TEST(PhoneSetTest, ClassListIsTheCmuSetPlusSilence) {
  std::set<absl::string_view> names(kPhoneClasses.begin(), kPhoneClasses.end());
  EXPECT_EQ(names.size(), 40u);  // no duplicates
  EXPECT_EQ(kPhoneClasses[kSilenceClass], "pau");
}

TEST(PhoneSetTest, EveryClassNameMapsToItself) {
  for (int i = 0; i < kNumPhoneClasses; ++i) {
    absl::StatusOr<int> id = PhoneClassId(kPhoneClasses[i]);
    ASSERT_TRUE(id.ok()) << id.status();
    EXPECT_EQ(*id, i);
  }
}

TEST(PhoneSetTest, FliteReducedPhonesFoldIntoCmuClasses) {
  EXPECT_EQ(*PhoneClassId("ax"), *PhoneClassId("ah"));
  EXPECT_EQ(*PhoneClassId("axr"), *PhoneClassId("er"));
  EXPECT_EQ(*PhoneClassId("h#"), kSilenceClass);
}

TEST(PhoneSetTest, UnknownPhoneIsInvalidArgument) {
  absl::StatusOr<int> id = PhoneClassId("xx");
  EXPECT_EQ(id.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(id.status().message().find("xx"), absl::string_view::npos);
  EXPECT_FALSE(PhoneClassId("").ok());
  EXPECT_FALSE(PhoneClassId("AA").ok());
}

}  // namespace
}  // namespace asgd::corpus
