// The bad-data reporter: each skipped utterance logged (up to a limit, then
// one note), counted by reason, and in the worker's metric.
#include "worker/kaldi_flags.h"

#include <sstream>

#include "gtest/gtest.h"
#include "kaldi/bad_data.h"
#include "prometheus/registry.h"

namespace asgd {
namespace {

double Skipped(prometheus::Registry& registry, const std::string& reason) {
  for (const auto& family : registry.Collect()) {
    if (family.name != "asgd_worker_bad_data_skipped_total") continue;
    for (const auto& m : family.metric) {
      for (const auto& l : m.label) {
        if (l.name == "reason" && l.value == reason) return m.counter.value;
      }
    }
  }
  return -1;
}

TEST(BadDataReporterTest, LogsCountsAndExportsEachSkippedUtterance) {
  prometheus::Registry registry;
  std::ostringstream log;
  BadDataReporter reporter(&log, "worker 3: ", &registry, 3, /*max_lines=*/2);
  auto callback = reporter.Callback();
  using kaldi::BadDataReason;
  callback(kaldi::BadDataError(BadDataReason::kTruncated,
                               {"/d/feats.ark", 88, 0, "spk1-u1"}, "cut"));
  callback(kaldi::BadDataError(BadDataReason::kNonFinite,
                               {"/d/feats.ark", 120, 0, "spk1-u2"}, "NaN"));
  callback(kaldi::BadDataError(BadDataReason::kTruncated,
                               {"/d/feats.ark", 300, 0, "spk2-u9"}, "cut"));
  callback(kaldi::BadDataError(BadDataReason::kTruncated,
                               {"/d/feats.ark", 400, 0, "spk2-u10"}, "cut"));
  EXPECT_EQ(reporter.counts().Get(BadDataReason::kTruncated), 3);
  EXPECT_EQ(reporter.counts().Get(BadDataReason::kNonFinite), 1);
  EXPECT_EQ(Skipped(registry, "truncated"), 3);
  EXPECT_EQ(Skipped(registry, "non_finite"), 1);
  EXPECT_EQ(Skipped(registry, "length_mismatch"), 0);  // every reason exists
  const std::string text = log.str();
  EXPECT_NE(text.find("worker 3: skipped bad data: /d/feats.ark at byte 88 "
                      "(utterance spk1-u1): truncated: cut\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("spk1-u2"), std::string::npos);
  EXPECT_EQ(text.find("spk2-u9"), std::string::npos) << "past the line limit";
  EXPECT_NE(text.find("counted, no longer logged"), std::string::npos);
  EXPECT_EQ(text.find("spk2-u10"), std::string::npos);
}

}  // namespace
}  // namespace asgd
