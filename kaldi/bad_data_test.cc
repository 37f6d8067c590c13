#include "kaldi/bad_data.h"

#include <cstring>
#include <limits>
#include <vector>

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

// 0x7e7e7e7e read as a float: finite garbage (about 8.4e37).
float Garbage() {
  const uint32_t bits = 0x7e7e7e7e;
  float v;
  std::memcpy(&v, &bits, 4);
  return v;
}

TEST(BadDataTest, FeatureValuesBeyondTheBoundOrNotFiniteAreRefused) {
  const DataLocation where{"/d/feats.ark", 99, 0, "u1"};
  std::vector<float> rows = {1, -2, 3, 9999, -10000, 0.5};  // 2 x 3
  float max_abs = -1;
  ASSERT_TRUE(
      CheckFeatureValues(rows, 3, 1e4f, where, "as read", &max_abs).ok());
  EXPECT_EQ(max_abs, 10000);

  ASSERT_GT(Garbage(), 8e37f);
  rows[4] = Garbage();
  absl::Status s = CheckFeatureValues(rows, 3, 1e4f, where, "as read");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(BadDataReasonOf(s), BadDataReason::kFeatureMagnitude);
  EXPECT_THAT(s.message(),
              HasSubstr("/d/feats.ark at byte 99 (utterance u1): "
                        "feature_magnitude: feature row 1, column 1 as read"));
  // The bound is a parameter; +inf leaves only non-finite values refused.
  EXPECT_TRUE(CheckFeatureValues(rows, 3,
                                 std::numeric_limits<float>::infinity(), where,
                                 "as read")
                  .ok());
  rows[4] = -10001;
  s = CheckFeatureValues(rows, 3, 1e4f, where, "after CMVN");
  EXPECT_EQ(BadDataReasonOf(s), BadDataReason::kFeatureMagnitude);
  EXPECT_THAT(s.message(), HasSubstr("after CMVN"));

  // The first offender is named; NaN and Inf are non_finite whatever the
  // bound.
  for (float bad : {std::numeric_limits<float>::quiet_NaN(),
                    -std::numeric_limits<float>::infinity()}) {
    rows[2] = bad;
    s = CheckFeatureValues(rows, 3, std::numeric_limits<float>::infinity(),
                           where, "as read");
    EXPECT_EQ(BadDataReasonOf(s), BadDataReason::kNonFinite) << s;
    EXPECT_THAT(s.message(), HasSubstr("feature row 0, column 2"));
  }
  EXPECT_TRUE(CheckFeatureValues({}, 3, 1e4f, where, "as read", &max_abs).ok());
  EXPECT_EQ(max_abs, 0);
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
