// The Kaldi input the flags describe, with bad CMVN statistics; the
// bad-data reporter: each skipped utterance logged (up to a limit, then one
// note), counted by reason, and in the worker's metric.
#include "worker/kaldi_flags.h"

#include <sstream>

#include "absl/flags/declare.h"
#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kaldi/bad_data.h"
#include "kaldi/test_data_dir.h"
#include "prometheus/registry.h"

ABSL_DECLARE_FLAG(std::string, kaldi_data);
ABSL_DECLARE_FLAG(std::string, kaldi_alignments);
ABSL_DECLARE_FLAG(std::string, bad_data);

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

// A speaker whose CMVN statistics count no frame, under the default global
// CMVN (`auto`: the pooled statistics of the directory's speakers): refused
// naming the speaker and cmvn.scp's line; with --bad_data=skip the pool
// leaves the speaker out (said in the log line) and the speaker's
// utterances are skipped and counted, the others read.
TEST(KaldiInputFromFlagsTest, ASpeakerWithoutFramesIsNamedOrSkipped) {
  kaldi::testing::TestDataDir d(
      kaldi::testing::MakeTempDir(::testing::TempDir(), "flags_cmvn"));
  d.cmvn_override()["spk1"] =
      kaldi::testing::DmObject(2, 4, {1, 2, 3, 0, 1, 1, 1, 0});
  d.Write();
  absl::SetFlag(&FLAGS_kaldi_data, d.dir());
  absl::SetFlag(&FLAGS_kaldi_alignments, d.alignments());
  absl::SetFlag(&FLAGS_bad_data, "refuse");
  auto in = KaldiInputFromFlags(true, MissingGlobalCmvn::kError);
  EXPECT_EQ(in.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(kaldi::BadDataReasonOf(in.status()), kaldi::BadDataReason::kBadCmvn)
      << in.status();
  EXPECT_THAT(in.status().message(), ::testing::HasSubstr(absl::StrCat(
                                         d.path("cmvn.scp"), " line 2")));
  EXPECT_THAT(in.status().message(), ::testing::HasSubstr("speaker spk1"));

  absl::SetFlag(&FLAGS_bad_data, "skip");
  in = KaldiInputFromFlags(true, MissingGlobalCmvn::kError);
  ASSERT_TRUE(in.ok()) << in.status();
  EXPECT_THAT(in->global_cmvn_source, ::testing::HasSubstr("speaker spk1"));
  in->temp_dir = ::testing::TempDir();
  std::vector<absl::Status> skipped;
  in->on_skip = [&](const absl::Status& s) { skipped.push_back(s); };
  auto loaded = LoadKaldiUtterances(*in, 0, 1, int64_t{1} << 30);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->utterances->num_utterances(),
            kaldi::testing::TestDataDir::kUtterances - 4);
  EXPECT_EQ(loaded->bad.Get(kaldi::BadDataReason::kBadCmvn), 4);
  ASSERT_EQ(skipped.size(), 4u);
  EXPECT_THAT(skipped[0].message(), ::testing::HasSubstr("speaker spk1"));
  absl::SetFlag(&FLAGS_kaldi_data, "");
  absl::SetFlag(&FLAGS_kaldi_alignments, "");
  absl::SetFlag(&FLAGS_bad_data, "refuse");
}

}  // namespace
}  // namespace asgd
