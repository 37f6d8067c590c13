#include "kaldi/bad_data.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace asgd::kaldi {
namespace {

using ::testing::HasSubstr;

TEST(BadDataTest, ErrorCarriesReasonAndLocation) {
  const absl::Status s =
      BadDataError(BadDataReason::kNonFinite, {"/d/feats.ark", 1234, 0, "u7"},
                   "row 3 is nan");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(BadDataReasonOf(s), BadDataReason::kNonFinite);
  EXPECT_TRUE(IsBadData(s));
  EXPECT_EQ(
      s.message(),
      "/d/feats.ark at byte 1234 (utterance u7): non_finite: row 3 is nan");
  const absl::Status line = BadDataError(BadDataReason::kMalformedLine,
                                         {"feats.scp", 40, 3, ""}, "no path");
  EXPECT_THAT(line.message(), HasSubstr("feats.scp line 3 at byte 40: "));
}

TEST(BadDataTest, OtherStatusesHaveNoReason) {
  EXPECT_EQ(BadDataReasonOf(absl::OkStatus()), BadDataReason::kNone);
  EXPECT_EQ(BadDataReasonOf(absl::InvalidArgumentError("bad flag")),
            BadDataReason::kNone);
  EXPECT_FALSE(IsBadData(absl::NotFoundError("x")));
}

TEST(BadDataTest, EveryReasonHasADistinctNameThatRoundTrips) {
  for (int i = 1; i < kNumBadDataReasons; ++i) {
    const auto reason = static_cast<BadDataReason>(i);
    EXPECT_EQ(BadDataReasonOf(BadDataError(reason, {}, "x")), reason)
        << BadDataReasonName(reason);
    for (int j = 1; j < i; ++j) {
      EXPECT_NE(BadDataReasonName(reason),
                BadDataReasonName(static_cast<BadDataReason>(j)));
    }
  }
}

TEST(BadDataTest, PolicyAndCounts) {
  EXPECT_EQ(*ParseBadDataPolicy("skip"), BadDataPolicy::kSkip);
  EXPECT_EQ(*ParseBadDataPolicy("refuse"), BadDataPolicy::kRefuse);
  EXPECT_EQ(ParseBadDataPolicy("ignore").status().code(),
            absl::StatusCode::kInvalidArgument);
  BadDataCounts counts;
  EXPECT_EQ(counts.ToString(), "none");
  counts.Add(BadDataReason::kTruncated);
  counts.Add(BadDataReason::kNonFinite);
  counts.Add(BadDataReason::kNonFinite);
  EXPECT_EQ(counts.Total(), 3);
  EXPECT_EQ(counts.Get(BadDataReason::kNonFinite), 2);
  EXPECT_EQ(counts.ToString(), "truncated=1 non_finite=2");
}

}  // namespace
}  // namespace asgd::kaldi
