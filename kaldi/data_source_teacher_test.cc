// KaldiDataSource with a teacher scp: each utterance comes with its teacher
// log-posteriors exactly as stored; an utterance without them is bad data
// missing_teacher (at Create), one whose matrix has the wrong row count, a
// NaN, or rows that are not log-distributions is bad_teacher (at Next):
// refused naming the utterance, or skipped and counted.
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kaldi/bad_data.h"
#include "kaldi/data_source.h"
#include "kaldi/test_archive.h"
#include "kaldi/test_data_dir.h"

namespace asgd::kaldi {
namespace {

using ::testing::HasSubstr;
using testing::TestDataDir;
using testing::UttSpec;

// Row f of utterance u: the log-softmax of sin(u + f + c), in double.
std::vector<float> LogSoftmaxRows(int u, int frames, int classes) {
  std::vector<float> out;
  for (int f = 0; f < frames; ++f) {
    std::vector<double> z(classes);
    double m = -1e30, s = 0;
    for (int c = 0; c < classes; ++c) {
      z[c] = std::sin(u + f + 0.5 * c);
      m = std::max(m, z[c]);
    }
    for (double v : z) s += std::exp(v - m);
    for (double v : z) out.push_back(static_cast<float>(v - m - std::log(s)));
  }
  return out;
}

class DataSourceTeacherTest : public ::testing::Test {
 protected:
  void SetUp() override {
    data_ = std::make_unique<TestDataDir>(
        testing::MakeTempDir(::testing::TempDir(), "teacher"));
    data_->Write();
    KaldiDataOptions o = Options();
    auto plain = KaldiDataSource::Create(o);
    ASSERT_TRUE(plain.ok()) << plain.status();
    classes_ = (*plain)->num_classes();
  }

  KaldiDataOptions Options() const {
    KaldiDataOptions o;
    o.data_dir = data_->dir();
    o.alignments = data_->alignments();
    o.shuffle = false;
    o.temp_dir = ::testing::TempDir();
    return o;
  }

  // Writes teacher.ark/.scp: every utterance's rows, but those in `skip`
  // (no entry) and `objects` (this object instead).
  std::string WriteTeacher(const std::vector<int>& skip,
                           const std::map<int, std::string>& objects) {
    testing::TestArchive ark;
    const std::vector<UttSpec>& utts = data_->utts();
    for (int u = 0; u < static_cast<int>(utts.size()); ++u) {
      if (std::find(skip.begin(), skip.end(), u) != skip.end()) continue;
      const int frames = utts[u].frames();
      want_[utts[u].key] = LogSoftmaxRows(u, frames, classes_);
      ark.Add(utts[u].key,
              objects.count(u) ? objects.at(u)
                               : testing::FmObject(frames, classes_,
                                                   want_[utts[u].key]));
    }
    const std::string path = data_->path("teacher.ark");
    testing::WriteFile(path, ark.bytes());
    std::string scp;
    for (int u = 0; u < static_cast<int>(utts.size()); ++u) {
      if (std::find(skip.begin(), skip.end(), u) != skip.end()) continue;
      scp += utts[u].key + " " + path + ":" +
             std::to_string(ark.offset(utts[u].key)) + "\n";
    }
    testing::WriteFile(data_->path("teacher.scp"), scp);
    return data_->path("teacher.scp");
  }

  std::unique_ptr<TestDataDir> data_;
  int classes_ = 0;
  std::map<std::string, std::vector<float>> want_;
};

TEST_F(DataSourceTeacherTest, EveryUtteranceComesWithItsTeacherRows) {
  KaldiDataOptions o = Options();
  o.teacher_scp = WriteTeacher({}, {});
  auto source = KaldiDataSource::Create(o);
  ASSERT_TRUE(source.ok()) << source.status();
  EXPECT_TRUE((*source)->has_teacher());
  KaldiUtterance u;
  int read = 0;
  while (true) {
    absl::StatusOr<bool> more = (*source)->Next(&u);
    ASSERT_TRUE(more.ok()) << more.status();
    if (!*more) break;
    ++read;
    EXPECT_EQ(u.teacher.rows, u.num_frames()) << u.key;
    EXPECT_EQ(u.teacher.cols, classes_) << u.key;
    EXPECT_EQ(u.teacher.data, want_[u.key]) << u.key;
  }
  EXPECT_EQ(read, TestDataDir::kUtterances);
}

TEST_F(DataSourceTeacherTest, MissingAndBadTeachersAreRefusedOrSkipped) {
  const std::vector<UttSpec>& utts = data_->utts();
  const int f3 = utts[3].frames(), f4 = utts[4].frames(),
            f5 = utts[5].frames();
  std::vector<float> nan_rows = LogSoftmaxRows(5, f5, classes_);
  nan_rows[1] = std::nanf("");
  const std::map<int, std::string> bad = {
      // One row short.
      {3, testing::FmObject(f3 - 1, classes_,
                            LogSoftmaxRows(3, f3 - 1, classes_))},
      // Zeros: log sum exp = log(classes), log-likelihoods, not posteriors.
      {4, testing::FmObject(f4, classes_,
                            std::vector<float>(int64_t{f4} * classes_, 0))},
      {5, testing::FmObject(f5, classes_, nan_rows)},
  };
  KaldiDataOptions o = Options();
  o.teacher_scp = WriteTeacher({2}, bad);
  // Refused: the missing one at Create.
  absl::StatusOr<std::unique_ptr<KaldiDataSource>> refused =
      KaldiDataSource::Create(o);
  EXPECT_EQ(BadDataReasonOf(refused.status()), BadDataReason::kMissingTeacher);
  EXPECT_THAT(refused.status().message(), HasSubstr(utts[2].key));
  // Without it, the first bad matrix when read.
  o.teacher_scp = WriteTeacher({}, bad);
  auto source = KaldiDataSource::Create(o);
  ASSERT_TRUE(source.ok()) << source.status();
  KaldiUtterance u;
  absl::Status first;
  while (first.ok()) {
    absl::StatusOr<bool> more = (*source)->Next(&u);
    if (!more.ok()) first = more.status();
    if (more.ok() && !*more) break;
  }
  EXPECT_EQ(BadDataReasonOf(first), BadDataReason::kBadTeacher);
  EXPECT_THAT(first.message(), HasSubstr(utts[3].key));
  // Skipped: every other utterance, each bad one counted once.
  o.teacher_scp = WriteTeacher({2}, bad);
  o.policy = BadDataPolicy::kSkip;
  int reported = 0;
  o.on_skip = [&](const absl::Status&) { ++reported; };
  source = KaldiDataSource::Create(o);
  ASSERT_TRUE(source.ok()) << source.status();
  std::vector<std::string> keys;
  while (true) {
    absl::StatusOr<bool> more = (*source)->Next(&u);
    ASSERT_TRUE(more.ok()) << more.status();
    if (!*more) break;
    keys.push_back(u.key);
    EXPECT_EQ(u.teacher.data, want_[u.key]);
  }
  std::vector<std::string> want;
  for (int i = 0; i < static_cast<int>(utts.size()); ++i) {
    if (i < 2 || i > 5) want.push_back(utts[i].key);
  }
  EXPECT_EQ(keys, want);
  EXPECT_EQ((*source)->bad_data().Get(BadDataReason::kMissingTeacher), 1);
  EXPECT_EQ((*source)->bad_data().Get(BadDataReason::kBadTeacher), 3);
  EXPECT_EQ(reported, 4);
}

TEST_F(DataSourceTeacherTest, FeaturesOnlyTakesNoTeacher) {
  KaldiDataOptions o = Options();
  o.alignments.clear();
  o.features_only = true;
  o.teacher_scp = WriteTeacher({}, {});
  EXPECT_EQ(KaldiDataSource::Create(o).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace asgd::kaldi
