#include "kaldi/corpus_export.h"

#include <sys/stat.h>

#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "corpus/corpus_io.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kaldi/archive_reader.h"
#include "kaldi/data_source.h"
#include "kaldi/test_archive.h"

namespace asgd::kaldi {
namespace {

constexpr int kDim = 4;

corpus::Utterance Utt(int voice, int frames, float base) {
  corpus::Utterance u;
  u.voice = voice;
  u.num_frames = frames;
  for (int t = 0; t < frames; ++t) {
    for (int d = 0; d < kDim; ++d) {
      u.features.push_back(base + 0.37f * t - 0.5f * d + 0.01f * t * d);
    }
    u.labels.push_back((t + voice) % 3);
  }
  return u;
}

// A corpus of 5 train utterances (two parts) and 2 held-out ones, with
// `<id> <voice> <text>` files.
class CorpusExportTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::MakeTempDir(::testing::TempDir(), "corpus_export");
    corpus_ = dir_ + "/corpus";
    ASSERT_EQ(::mkdir(corpus_.c_str(), 0755), 0);
    train_ = {Utt(1, 12, 0.0f), Utt(0, 9, 5.0f), Utt(1, 20, -3.0f),
              Utt(2, 3, 1.0f), Utt(0, 15, 2.0f)};
    heldout_ = {Utt(2, 11, 4.0f), Utt(0, 7, -1.0f)};
    ASSERT_TRUE(corpus::WriteUtteranceFile(corpus_ + "/train-00.bin", kDim,
                                           {train_[0], train_[1], train_[2]})
                    .ok());
    ASSERT_TRUE(corpus::WriteUtteranceFile(corpus_ + "/train-01.bin", kDim,
                                           {train_[3], train_[4]})
                    .ok());
    ASSERT_TRUE(
        corpus::WriteUtteranceFile(corpus_ + "/heldout-00.bin", kDim, heldout_)
            .ok());
    testing::WriteFile(corpus_ + "/train-00.txt",
                       "train-000000 awb hello there\n"
                       "train-000001 kal16 general kenobi\n"
                       "train-000002 awb one two three\n");
    testing::WriteFile(corpus_ + "/train-01.txt",
                       "train-000003 rms four\ntrain-000004 kal16 five six\n");
    testing::WriteFile(
        corpus_ + "/heldout-00.txt",
        "heldout-000000 rms seven\nheldout-000001 kal16 eight\n");
    testing::WriteFile(corpus_ + "/corpus.txt",
                       "format asgd-corpus-1\nfeature_dim 4\nnum_classes 3\n"
                       "classes a b pau\nmean 0 0 0 0\nstddev 1 1 1 1\n"
                       "seed 1\ntrain_files train-00.bin train-01.bin\n"
                       "heldout_files heldout-00.bin\n");
  }

  // key -> corpus utterance of the train split, by the ids above.
  std::map<std::string, const corpus::Utterance*> TrainByKey() {
    return {{"awb-train-000000", &train_[0]},
            {"kal16-train-000001", &train_[1]},
            {"awb-train-000002", &train_[2]},
            {"rms-train-000003", &train_[3]},
            {"kal16-train-000004", &train_[4]}};
  }

  std::string dir_, corpus_;
  std::vector<corpus::Utterance> train_, heldout_;
};

TEST_F(CorpusExportTest, WritesAKaldiDataDirectoryPerSplit) {
  CorpusExportOptions o;
  o.corpus_dir = corpus_;
  o.out_dir = dir_ + "/kaldi";
  auto summary = ExportCorpusToKaldi(o);
  ASSERT_TRUE(summary.ok()) << summary.status();
  EXPECT_EQ(summary->feature_dim, kDim);
  EXPECT_EQ(summary->num_classes, 3);
  EXPECT_EQ(summary->train.utterances, 5);
  EXPECT_EQ(summary->train.frames, 12 + 9 + 20 + 3 + 15);
  EXPECT_EQ(summary->train.speakers, 3);
  EXPECT_EQ(summary->heldout.utterances, 2);

  const std::string train = o.out_dir + "/train";
  EXPECT_EQ(testing::ReadFile(o.out_dir + "/classes.txt"), "a 0\nb 1\npau 2\n");
  EXPECT_EQ(testing::ReadFile(train + "/utt2spk"),
            "awb-train-000000 awb\nawb-train-000002 awb\n"
            "kal16-train-000001 kal16\nkal16-train-000004 kal16\n"
            "rms-train-000003 rms\n");
  EXPECT_EQ(testing::ReadFile(train + "/spk2utt"),
            "awb awb-train-000000 awb-train-000002\n"
            "kal16 kal16-train-000001 kal16-train-000004\n"
            "rms rms-train-000003\n");
  EXPECT_EQ(testing::ReadFile(train + "/text"),
            "awb-train-000000 hello there\nawb-train-000002 one two three\n"
            "kal16-train-000001 general kenobi\nkal16-train-000004 five six\n"
            "rms-train-000003 four\n");

  // Read back through the library's data source (no CMVN): labels exact,
  // features within the compression's precision (CM: 1/63 of a column's
  // top quarter, bounded by 2% of the utterance's range; CM2 for <= 8 rows).
  KaldiDataOptions d;
  d.data_dir = train;
  d.alignments = train + "/pdf.ark";
  d.shuffle = false;
  d.cmvn = CmvnMode::kOff;
  d.temp_dir = ::testing::TempDir();
  auto source = KaldiDataSource::Create(d);
  ASSERT_TRUE(source.ok()) << source.status();
  EXPECT_EQ(source->get()->num_classes(), 3);
  const auto by_key = TrainByKey();
  KaldiUtterance u;
  int n = 0;
  while (*(*source)->Next(&u)) {
    const corpus::Utterance& want = *by_key.at(u.key);
    ASSERT_EQ(u.num_frames(), want.num_frames);
    EXPECT_EQ(u.labels, want.labels);
    float lo = want.features[0], hi = lo;
    for (float v : want.features) lo = std::min(lo, v), hi = std::max(hi, v);
    for (size_t k = 0; k < want.features.size(); ++k) {
      ASSERT_NEAR(u.features.data[k], want.features[k], 0.02 * (hi - lo))
          << u.key;
    }
    ++n;
  }
  EXPECT_EQ(n, 5);

  // CMVN statistics: per speaker sums of the features as stored.
  RxfilenameReader reader;
  std::map<std::string, std::vector<double>> sums;
  for (const auto& [key, utt] : by_key) {
    Rxfilename rx;
    const std::string scp = testing::ReadFile(train + "/feats.scp");
    const size_t at = scp.find(key + " ");
    const size_t colon = scp.find(':', at);
    rx.path = scp.substr(at + key.size() + 1, colon - at - key.size() - 1);
    rx.has_offset = true;
    rx.offset = std::stoll(scp.substr(colon + 1));
    Matrix m;
    ASSERT_TRUE(reader.ReadMatrix(rx, key, &m).ok());
    std::vector<double>& s = sums[key.substr(0, key.find('-'))];
    s.resize(kDim + 1);
    for (int t = 0; t < m.rows; ++t) {
      for (int k = 0; k < kDim; ++k) s[k] += m.at(t, k);
      s[kDim] += 1;
    }
  }
  auto cmvn = SequentialArchiveReader::Open(train + "/cmvn.ark");
  ASSERT_TRUE(cmvn.ok());
  int speakers = 0;
  while (*(*cmvn)->Next()) {
    Matrix stats;
    ASSERT_TRUE((*cmvn)->ReadMatrix(&stats).ok());
    ASSERT_EQ(stats.rows, 2);
    ASSERT_EQ(stats.cols, kDim + 1);
    const std::vector<double>& s = sums.at((*cmvn)->key());
    for (int k = 0; k <= kDim; ++k) {
      EXPECT_NEAR(stats.at(0, k), s[k], 1e-3 * (1 + std::fabs(s[k])));
    }
    ++speakers;
  }
  EXPECT_EQ(speakers, 3);
}

TEST_F(CorpusExportTest, FloatFeaturesAreExactAndAlignmentsCanBeGzipped) {
  CorpusExportOptions o;
  o.corpus_dir = corpus_;
  o.out_dir = dir_ + "/fm";
  o.feature_format = MatrixFormat::kFloat;
  o.gzip_alignments = true;
  ASSERT_TRUE(ExportCorpusToKaldi(o).ok());
  KaldiDataOptions d;
  d.data_dir = o.out_dir + "/heldout";
  d.alignments = o.out_dir + "/heldout/pdf.1.gz";
  d.shuffle = false;
  d.cmvn = CmvnMode::kOff;
  d.temp_dir = ::testing::TempDir();
  auto source = KaldiDataSource::Create(d);
  ASSERT_TRUE(source.ok()) << source.status();
  KaldiUtterance u;
  ASSERT_TRUE(*(*source)->Next(&u));
  EXPECT_EQ(u.key, "kal16-heldout-000001");
  EXPECT_EQ(u.features.data, heldout_[1].features);
  ASSERT_TRUE(*(*source)->Next(&u));
  EXPECT_EQ(u.key, "rms-heldout-000000");
  EXPECT_EQ(u.features.data, heldout_[0].features);
  EXPECT_EQ(u.labels, heldout_[0].labels);
}

// Copies of the training split: every utterance k times, the same features
// and labels under keys of the same speaker; the held-out split once.
TEST_F(CorpusExportTest, TrainCopiesRepeatTheTrainingSplit) {
  CorpusExportOptions o;
  o.corpus_dir = corpus_;
  o.out_dir = dir_ + "/copies";
  o.feature_format = MatrixFormat::kFloat;
  o.train_copies = 3;
  auto summary = ExportCorpusToKaldi(o);
  ASSERT_TRUE(summary.ok()) << summary.status();
  int64_t frames = 0;
  for (const corpus::Utterance& u : train_) frames += u.num_frames;
  EXPECT_EQ(summary->train.utterances, 3 * 5);
  EXPECT_EQ(summary->train.frames, 3 * frames);
  EXPECT_EQ(summary->heldout.utterances, 2);
  KaldiDataOptions d;
  d.data_dir = o.out_dir + "/train";
  d.alignments = o.out_dir + "/train/pdf.ark";
  d.shuffle = false;
  d.cmvn = CmvnMode::kOff;
  d.temp_dir = ::testing::TempDir();
  auto source = KaldiDataSource::Create(d);
  ASSERT_TRUE(source.ok()) << source.status();
  std::map<std::string, KaldiUtterance> by_key;
  KaldiUtterance u;
  while (*(*source)->Next(&u)) by_key[u.key] = u;
  ASSERT_EQ(by_key.size(), 15u);
  const KaldiUtterance& original = by_key.at("kal16-train-000001");
  for (const char* copy : {"kal16-train-000001-copy1", "kal16-train-000001-copy2"}) {
    ASSERT_EQ(by_key.count(copy), 1u) << copy;
    EXPECT_EQ(by_key.at(copy).features.data, original.features.data);
    EXPECT_EQ(by_key.at(copy).labels, original.labels);
  }
  EXPECT_EQ(original.features.data, train_[1].features);
  o.train_copies = 0;
  EXPECT_EQ(ExportCorpusToKaldi(o).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(CorpusExportTest, MismatchedTextFilesAndMissingCorpusAreErrors) {
  testing::WriteFile(corpus_ + "/train-01.txt", "train-000003 rms four\n");
  CorpusExportOptions o;
  o.corpus_dir = corpus_;
  o.out_dir = dir_ + "/bad";
  EXPECT_EQ(ExportCorpusToKaldi(o).status().code(),
            absl::StatusCode::kInvalidArgument);
  o.corpus_dir = dir_ + "/no-corpus";
  EXPECT_EQ(ExportCorpusToKaldi(o).status().code(),
            absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace asgd::kaldi
