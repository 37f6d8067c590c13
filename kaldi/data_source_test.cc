#include "kaldi/data_source.h"

#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kaldi/pooled_cmvn.h"
#include "kaldi/test_archive.h"
#include "kaldi/test_data_dir.h"

namespace asgd::kaldi {
namespace {

using ::testing::HasSubstr;
using testing::TestDataDir;
using testing::UttSpec;

KaldiDataOptions OptionsFor(const TestDataDir& d) {
  KaldiDataOptions o;
  o.data_dir = d.dir();
  o.alignments = d.alignments();
  o.shuffle = false;
  o.temp_dir = ::testing::TempDir();
  return o;
}

// Every utterance of one pass, or the first error.
absl::StatusOr<std::vector<KaldiUtterance>> Pass(KaldiDataSource* source,
                                                 uint64_t epoch) {
  source->StartEpoch(epoch);
  std::vector<KaldiUtterance> out;
  KaldiUtterance u;
  while (true) {
    absl::StatusOr<bool> more = source->Next(&u);
    if (!more.ok()) return more.status();
    if (!*more) return out;
    out.push_back(std::move(u));
  }
}

std::vector<std::string> Keys(const std::vector<KaldiUtterance>& utts) {
  std::vector<std::string> keys;
  for (const KaldiUtterance& u : utts) keys.push_back(u.key);
  return keys;
}

std::vector<std::string> SpecKeys(TestDataDir& d) {
  std::vector<std::string> keys;
  for (const UttSpec& u : d.utts()) keys.push_back(u.key);
  return keys;
}

class DataSourceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    data_ = std::make_unique<TestDataDir>(
        testing::MakeTempDir(::testing::TempDir(), "data_source"));
  }
  std::unique_ptr<TestDataDir> data_;
};

// Decoded values (formula in double) after per-speaker CMVN, for all four
// storage formats and a row range. Tolerance: the float decode and float
// CMVN arithmetic, 1e-4 on values of magnitude <= 10.
TEST_F(DataSourceTest, ReadsEveryUtteranceWithSpeakerCmvn) {
  data_->Write();
  for (bool norm_vars : {false, true}) {
    KaldiDataOptions o = OptionsFor(*data_);
    o.norm_vars = norm_vars;
    auto source = KaldiDataSource::Create(o);
    ASSERT_TRUE(source.ok()) << source.status();
    EXPECT_EQ((*source)->feature_dim(), 3);
    EXPECT_EQ((*source)->num_classes(), 10);
    EXPECT_TRUE((*source)->cmvn_applied());
    EXPECT_EQ((*source)->num_utterances(), TestDataDir::kUtterances);
    int64_t frames = 0;
    for (const UttSpec& u : data_->utts()) frames += u.frames();
    EXPECT_EQ((*source)->num_frames(), frames);
    auto utts = Pass(source->get(), 0);
    ASSERT_TRUE(utts.ok()) << utts.status();
    ASSERT_EQ(Keys(*utts), SpecKeys(*data_));  // feats.scp order
    for (size_t i = 0; i < utts->size(); ++i) {
      const UttSpec& spec = data_->utts()[i];
      const KaldiUtterance& got = (*utts)[i];
      ASSERT_EQ(got.num_frames(), spec.frames()) << spec.key;
      EXPECT_EQ(got.labels, spec.labels);
      const std::vector<double> want = data_->Normalised(spec, norm_vars);
      for (size_t k = 0; k < want.size(); ++k) {
        ASSERT_NEAR(got.features.data[k], want[k], 1e-4)
            << spec.key << " element " << k;
      }
    }
  }
}

TEST_F(DataSourceTest, WithoutCmvnFloatMatricesAreExact) {
  data_->Write();
  KaldiDataOptions o = OptionsFor(*data_);
  o.cmvn = CmvnMode::kOff;
  auto source = KaldiDataSource::Create(o);
  ASSERT_TRUE(source.ok());
  EXPECT_FALSE((*source)->cmvn_applied());
  auto utts = Pass(source->get(), 0);
  ASSERT_TRUE(utts.ok());
  for (size_t i = 0; i < utts->size(); i += 4) {  // the FM utterances
    const std::vector<double> want = data_->utts()[i].read_values();
    ASSERT_EQ((*utts)[i].features.data.size(), want.size());
    for (size_t k = 0; k < want.size(); ++k) {
      EXPECT_EQ((*utts)[i].features.data[k], static_cast<float>(want[k]));
    }
  }
  // Without cmvn.scp, kAuto applies nothing and kRequire is an error.
  ASSERT_EQ(::remove(data_->path("cmvn.scp").c_str()), 0);
  o.cmvn = CmvnMode::kAuto;
  source = KaldiDataSource::Create(o);
  ASSERT_TRUE(source.ok());
  EXPECT_FALSE((*source)->cmvn_applied());
  o.cmvn = CmvnMode::kRequire;
  EXPECT_EQ(KaldiDataSource::Create(o).status().code(),
            absl::StatusCode::kNotFound);
}

TEST_F(DataSourceTest, PartIOfNGetsExactlyItsUtterances) {
  data_->Write();
  const std::vector<std::string> all = SpecKeys(*data_);
  for (int n : {1, 2, 3, 5, 13}) {
    std::set<std::string> seen;
    for (int part = 0; part < n; ++part) {
      KaldiDataOptions o = OptionsFor(*data_);
      o.part = part;
      o.num_parts = n;
      o.shuffle = true;
      auto source = KaldiDataSource::Create(o);
      ASSERT_TRUE(source.ok()) << source.status();
      // Every part agrees on the shapes, whatever utterances it holds.
      EXPECT_EQ((*source)->feature_dim(), 3);
      EXPECT_EQ((*source)->num_classes(), 10);
      auto utts = Pass(source->get(), 0);
      ASSERT_TRUE(utts.ok());
      std::set<std::string> want;
      for (size_t i = part; i < all.size(); i += n) want.insert(all[i]);
      const std::vector<std::string> keys = Keys(*utts);
      EXPECT_EQ(std::set<std::string>(keys.begin(), keys.end()), want)
          << "part " << part << " of " << n;
      EXPECT_EQ(keys.size(), want.size());
      EXPECT_EQ((*source)->num_utterances(), static_cast<int64_t>(want.size()));
      // Every part counts the frames of all alignments alike.
      int64_t all_frames = 0;
      for (const UttSpec& u : data_->utts()) all_frames += u.frames();
      EXPECT_EQ((*source)->alignment_frames(), all_frames);
      for (const std::string& k : keys) EXPECT_TRUE(seen.insert(k).second);
    }
    EXPECT_EQ(seen.size(), all.size());
  }
  KaldiDataOptions o = OptionsFor(*data_);
  o.part = 2;
  o.num_parts = 2;
  EXPECT_EQ(KaldiDataSource::Create(o).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(DataSourceTest, ShufflesEachEpochAnewAndReproducibly) {
  data_->Write();
  KaldiDataOptions o = OptionsFor(*data_);
  o.shuffle = true;
  o.seed = 42;
  o.shuffle_buffer_utterances = 4;
  auto a = KaldiDataSource::Create(o);
  auto b = KaldiDataSource::Create(o);
  ASSERT_TRUE(a.ok() && b.ok());
  std::vector<std::vector<std::string>> orders;
  for (uint64_t epoch = 0; epoch < 4; ++epoch) {
    auto utts = Pass(a->get(), epoch);
    ASSERT_TRUE(utts.ok());
    std::vector<std::string> keys = Keys(*utts);
    auto again = Pass(b->get(), epoch);
    ASSERT_TRUE(again.ok());
    EXPECT_EQ(Keys(*again), keys) << "same seed and epoch, same order";
    orders.push_back(keys);
    std::sort(keys.begin(), keys.end());
    std::vector<std::string> all = SpecKeys(*data_);
    std::sort(all.begin(), all.end());
    EXPECT_EQ(keys, all) << "each epoch is a permutation";
  }
  EXPECT_NE(orders[0], orders[1]);
  EXPECT_NE(orders[1], orders[2]);
  EXPECT_NE(orders[0], SpecKeys(*data_));
  o.seed = 43;
  auto c = KaldiDataSource::Create(o);
  ASSERT_TRUE(c.ok());
  EXPECT_NE(Keys(*Pass(c->get(), 0)), orders[0]);
}

// The shuffle buffer never holds more than its limits, and reaches them.
TEST_F(DataSourceTest, ShuffleBufferStaysWithinItsLimits) {
  data_->Write();
  KaldiDataOptions o = OptionsFor(*data_);
  o.shuffle = true;
  o.shuffle_buffer_utterances = 3;
  auto source = KaldiDataSource::Create(o);
  ASSERT_TRUE(source.ok());
  KaldiUtterance u;
  int64_t max_seen = 0;
  for (uint64_t epoch = 0; epoch < 3; ++epoch) {
    (*source)->StartEpoch(epoch);
    while (*(*source)->Next(&u)) {
      max_seen = std::max(max_seen, (*source)->stats().buffer_utterances);
    }
  }
  EXPECT_EQ((*source)->stats().peak_buffer_utterances, 3);
  EXPECT_LE(max_seen, 3);

  // A byte limit of about two utterances (each is 60-100 bytes of data).
  o.shuffle_buffer_utterances = 1000;
  o.shuffle_buffer_bytes = 200;
  source = KaldiDataSource::Create(o);
  ASSERT_TRUE(source.ok());
  auto utts = Pass(source->get(), 0);
  ASSERT_TRUE(utts.ok());
  EXPECT_EQ(utts->size(), static_cast<size_t>(TestDataDir::kUtterances));
  const KaldiDataStats stats = (*source)->stats();
  EXPECT_LE(stats.peak_buffer_bytes, 200);
  EXPECT_GE(stats.peak_buffer_utterances, 2);
  EXPECT_EQ(stats.buffer_utterances, 0);
}

// Decoding reads features with CMVN and no alignments.
TEST_F(DataSourceTest, FeaturesOnlyReadsWithoutAlignments) {
  data_->Write();
  KaldiDataOptions labelled = OptionsFor(*data_);
  auto with_labels = KaldiDataSource::Create(labelled);
  ASSERT_TRUE(with_labels.ok());
  auto want = Pass(with_labels->get(), 0);
  ASSERT_TRUE(want.ok());

  KaldiDataOptions o = OptionsFor(*data_);
  o.alignments.clear();
  o.features_only = true;
  auto source = KaldiDataSource::Create(o);
  ASSERT_TRUE(source.ok()) << source.status();
  EXPECT_EQ((*source)->num_classes(), 0);
  EXPECT_TRUE((*source)->cmvn_applied());
  auto utts = Pass(source->get(), 0);
  ASSERT_TRUE(utts.ok()) << utts.status();
  ASSERT_EQ(utts->size(), want->size());
  for (size_t i = 0; i < utts->size(); ++i) {
    EXPECT_EQ((*utts)[i].key, (*want)[i].key);
    EXPECT_EQ((*utts)[i].features.data, (*want)[i].features.data);
    EXPECT_TRUE((*utts)[i].labels.empty());
  }
  // Alignments with features_only, or neither, are bad options.
  o.alignments = data_->alignments();
  EXPECT_EQ(KaldiDataSource::Create(o).status().code(),
            absl::StatusCode::kInvalidArgument);
  o.alignments.clear();
  o.features_only = false;
  EXPECT_EQ(KaldiDataSource::Create(o).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// Per-speaker means, then the directory's pooled statistics: every
// dimension has mean 0 and variance 1 over all utterances.
TEST_F(DataSourceTest, GlobalCmvnAfterSpeakerMeansGivesUnitVariance) {
  data_->Write();
  auto pooled = PooledCmvnStats(data_->dir());
  ASSERT_TRUE(pooled.ok()) << pooled.status();
  KaldiDataOptions o = OptionsFor(*data_);
  o.global_cmvn = *pooled;
  auto source = KaldiDataSource::Create(o);
  ASSERT_TRUE(source.ok()) << source.status();
  EXPECT_TRUE((*source)->global_cmvn_applied());
  auto utts = Pass(source->get(), 0);
  ASSERT_TRUE(utts.ok()) << utts.status();
  for (int d = 0; d < TestDataDir::kCols; ++d) {
    double n = 0, sum = 0, sumsq = 0;
    for (const KaldiUtterance& u : *utts) {
      for (int r = 0; r < u.features.rows; ++r) {
        const double x = u.features.at(r, d);
        n += 1;
        sum += x;
        sumsq += x * x;
      }
    }
    EXPECT_NEAR(sum / n, 0, 1e-4) << d;
    EXPECT_NEAR(sumsq / n, 1, 1e-3) << d;
  }
  // Statistics of another dimension: refused when read.
  DoubleMatrix wide;
  wide.Resize(2, 6);
  wide.at(0, 5) = 10;
  wide.at(1, 0) = wide.at(1, 1) = wide.at(1, 2) = wide.at(1, 3) =
      wide.at(1, 4) = 10;
  o.global_cmvn = wide;
  source = KaldiDataSource::Create(o);
  ASSERT_TRUE(source.ok());
  EXPECT_EQ(Pass(source->get(), 0).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST_F(DataSourceTest, ClassCountFromAFlag) {
  data_->Write();
  KaldiDataOptions o = OptionsFor(*data_);
  o.num_classes = 25;
  auto source = KaldiDataSource::Create(o);
  ASSERT_TRUE(source.ok());
  EXPECT_EQ((*source)->num_classes(), 25);
}

TEST_F(DataSourceTest, LabelsSpilledToDiskReadTheSame) {
  data_->Write();
  KaldiDataOptions o = OptionsFor(*data_);
  o.max_label_memory_bytes = 16;
  auto source = KaldiDataSource::Create(o);
  ASSERT_TRUE(source.ok());
  EXPECT_TRUE((*source)->stats().labels_spilled);
  auto utts = Pass(source->get(), 0);
  ASSERT_TRUE(utts.ok());
  for (size_t i = 0; i < utts->size(); ++i) {
    EXPECT_EQ((*utts)[i].labels, data_->utts()[i].labels);
  }
}

// ----- Bad data: each case once refused (code, reason, message naming the
// utterance, the file and the byte offset), once skipped (exactly that
// utterance missing, counted once under its reason, across passes).

struct BadCase {
  std::string name;
  int victim;
  BadDataReason reason;
  bool found_by_create;
  std::function<void(TestDataDir&, UttSpec&, KaldiDataOptions&)> make_bad;
  // The file and offset the message must name, known after Write().
  std::function<std::string(TestDataDir&, const UttSpec&)> where;
};

std::string FeatureWhere(TestDataDir& d, const UttSpec& u) {
  return absl::StrCat(d.path(u.archive), " at byte ", d.offset(u.key));
}

// Offset of a text alignment's object: just after "key ".
std::string TextAlignmentWhere(TestDataDir& d, const UttSpec& u) {
  const std::string text = testing::ReadFile(d.path("pdf.2.txt"));
  return absl::StrCat(d.path("pdf.2.txt"), " at byte ",
                      text.find(u.key + " ") + u.key.size() + 1);
}

std::string BinaryAlignmentWhere(TestDataDir& d, const UttSpec& u) {
  return absl::StrCat(d.path("pdf.1.gz"), " at byte ",
                      d.binary_alignment_offset(u.key));
}

std::vector<float> Filled(int n, float v) { return std::vector<float>(n, v); }

const std::vector<BadCase>& BadCases() {
  static const auto* cases = new std::vector<BadCase>{
      {"length_mismatch", 4, BadDataReason::kLengthMismatch, false,
       [](TestDataDir&, UttSpec& u, KaldiDataOptions&) { u.labels.pop_back(); },
       FeatureWhere},
      {"missing_alignment", 7, BadDataReason::kMissingAlignment, true,
       [](TestDataDir&, UttSpec& u, KaldiDataOptions&) {
         u.has_alignment = false;
       },
       FeatureWhere},
      {"unknown_token", 2, BadDataReason::kUnknownToken, false,
       [](TestDataDir&, UttSpec& u, KaldiDataOptions&) {
         u.object = testing::BinaryHeader() + "XM " + std::string(20, '\0');
       },
       FeatureWhere},
      {"vector_where_features_belong", 6, BadDataReason::kUnknownToken, false,
       [](TestDataDir&, UttSpec& u, KaldiDataOptions&) {
         u.object = testing::FvObject({1, 2, 3});
       },
       FeatureWhere},
      {"truncated_archive", 11, BadDataReason::kTruncated, false,
       [](TestDataDir& d, UttSpec& u, KaldiDataOptions&) {
         d.cut()[u.archive] = 5;  // the last object of feats.2.ark
       },
       FeatureWhere},
      {"label_beyond_class_count", 6, BadDataReason::kLabelOutOfRange, true,
       [](TestDataDir&, UttSpec& u, KaldiDataOptions& o) {
         o.num_classes = 10;
         u.labels[2] = 10;
       },
       BinaryAlignmentWhere},
      {"negative_label", 9, BadDataReason::kLabelOutOfRange, true,
       [](TestDataDir&, UttSpec& u, KaldiDataOptions&) { u.labels[1] = -1; },
       TextAlignmentWhere},
      {"nan_in_features", 8, BadDataReason::kNonFinite, false,
       [](TestDataDir&, UttSpec& u, KaldiDataOptions&) {
         std::vector<float> f = Filled(u.rows * u.cols, 1.0f);
         f[5] = std::numeric_limits<float>::quiet_NaN();
         u.object = testing::FmObject(u.rows, u.cols, f);
       },
       FeatureWhere},
      {"inf_in_features", 0, BadDataReason::kNonFinite, false,
       [](TestDataDir&, UttSpec& u, KaldiDataOptions&) {
         std::vector<float> f = Filled(u.rows * u.cols, 1.0f);
         f[0] = -std::numeric_limits<float>::infinity();
         u.object = testing::FmObject(u.rows, u.cols, f);
       },
       FeatureWhere},
      {"garbage_0x7e_in_features", 8, BadDataReason::kFeatureMagnitude, false,
       [](TestDataDir&, UttSpec& u, KaldiDataOptions&) {
         // 64 bytes of 0x7e: 16 finite floats of about 8.4e37.
         std::vector<float> f = Filled(u.rows * u.cols, 1.0f);
         std::memset(f.data() + 4, 0x7e, 64);
         u.object = testing::FmObject(u.rows, u.cols, f);
       },
       FeatureWhere},
      {"compressed_header_min_1e30", 2, BadDataReason::kFeatureMagnitude, false,
       [](TestDataDir&, UttSpec& u, KaldiDataOptions&) {
         u.object = testing::Cm2Object(1e30f, 1.0f, u.rows, u.cols,
                                       std::vector<uint16_t>(u.rows * u.cols));
       },
       FeatureWhere},
      {"compressed_header_range_0", 7, BadDataReason::kMalformedObject, false,
       [](TestDataDir&, UttSpec& u, KaldiDataOptions&) {
         u.object = testing::Cm3Object(0.5f, 0.0f, u.rows, u.cols,
                                       std::vector<uint8_t>(u.rows * u.cols));
       },
       FeatureWhere},
      {"offset_past_end", 10, BadDataReason::kOffsetPastEnd, false,
       [](TestDataDir& d, UttSpec& u, KaldiDataOptions&) {
         u.scp_rx = d.path(u.archive) + ":100000";
       },
       [](TestDataDir& d, const UttSpec& u) {
         return d.path(u.archive) + " at byte 100000";
       }},
      {"malformed_scp_line", 1, BadDataReason::kMalformedLine, true,
       [](TestDataDir& d, UttSpec& u, KaldiDataOptions&) {
         u.scp_rx = d.path(u.archive) + ":12x";
       },
       [](TestDataDir& d, const UttSpec&) {
         const std::string scp = testing::ReadFile(d.path("feats.scp"));
         return absl::StrCat(d.path("feats.scp"), " line 2 at byte ",
                             scp.find('\n') + 1);
       }},
      {"dimension_mismatch", 4, BadDataReason::kDimMismatch, false,
       [](TestDataDir&, UttSpec& u, KaldiDataOptions&) {
         u.object = testing::FmObject(u.rows, 4, Filled(u.rows * 4, 1.0f));
       },
       FeatureWhere},
      {"dimension_mismatch_first_utterance", 0, BadDataReason::kDimMismatch,
       false,
       [](TestDataDir&, UttSpec& u, KaldiDataOptions&) {
         u.object = testing::FmObject(u.rows, 4, Filled(u.rows * 4, 1.0f));
       },
       FeatureWhere},
      {"range_outside_matrix", 5, BadDataReason::kBadRange, false,
       [](TestDataDir&, UttSpec& u, KaldiDataOptions&) {
         u.scp_range = "[1:20]";  // 8 rows
       },
       FeatureWhere},
      {"missing_speaker", 3, BadDataReason::kMissingSpeaker, true,
       [](TestDataDir&, UttSpec& u, KaldiDataOptions&) {
         u.in_utt2spk = false;
       },
       FeatureWhere},
      {"truncated_alignment_archive", 10, BadDataReason::kTruncated, true,
       [](TestDataDir& d, UttSpec&, KaldiDataOptions&) {
         d.cut()["pdf.1.gz"] = 3;  // utterance 10 is its last entry
       },
       BinaryAlignmentWhere},
  };
  return *cases;
}

class BadDataTest : public ::testing::TestWithParam<BadCase> {
 protected:
  // A data directory with the case's victim made bad.
  std::unique_ptr<TestDataDir> Make(KaldiDataOptions* o) {
    auto d = std::make_unique<TestDataDir>(
        testing::MakeTempDir(::testing::TempDir(), GetParam().name));
    *o = OptionsFor(*d);
    GetParam().make_bad(*d, d->utts()[GetParam().victim], *o);
    d->Write();
    return d;
  }
};

TEST_P(BadDataTest, RefuseFailsNamingUtteranceFileAndOffset) {
  const BadCase& c = GetParam();
  KaldiDataOptions o;
  auto d = Make(&o);
  o.policy = BadDataPolicy::kRefuse;
  auto source = KaldiDataSource::Create(o);
  absl::Status s = source.status();
  EXPECT_EQ(!source.ok(), c.found_by_create) << s;
  if (source.ok()) s = Pass(source->get(), 0).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_EQ(BadDataReasonOf(s), c.reason) << s;
  const UttSpec& victim = d->utts()[c.victim];
  EXPECT_THAT(s.message(), HasSubstr(victim.key));
  EXPECT_THAT(s.message(), HasSubstr(c.where(*d, victim)));
  if (source.ok()) {  // the error stays until the next pass
    KaldiUtterance u;
    EXPECT_EQ((*source)->Next(&u).status(), s);
  }
}

TEST_P(BadDataTest, SkipDropsExactlyThatUtteranceAndCountsIt) {
  const BadCase& c = GetParam();
  KaldiDataOptions o;
  auto d = Make(&o);
  o.policy = BadDataPolicy::kSkip;
  o.shuffle = true;
  std::vector<absl::Status> reported;
  o.on_skip = [&](const absl::Status& s) { reported.push_back(s); };
  auto source = KaldiDataSource::Create(o);
  ASSERT_TRUE(source.ok()) << source.status();
  std::vector<std::string> want = SpecKeys(*d);
  want.erase(want.begin() + c.victim);
  std::sort(want.begin(), want.end());
  for (uint64_t epoch = 0; epoch < 2; ++epoch) {
    auto utts = Pass(source->get(), epoch);
    ASSERT_TRUE(utts.ok()) << utts.status();
    std::vector<std::string> keys = Keys(*utts);
    std::sort(keys.begin(), keys.end());
    EXPECT_EQ(keys, want);
    EXPECT_EQ((*source)->bad_data().Get(c.reason), 1)
        << (*source)->bad_data().ToString();
    EXPECT_EQ((*source)->bad_data().Total(), 1);
    EXPECT_EQ((*source)->num_utterances(), TestDataDir::kUtterances - 1);
    // Reported once, when dropped, with the refusal's message.
    ASSERT_EQ(reported.size(), 1u);
    EXPECT_EQ(BadDataReasonOf(reported[0]), c.reason);
    EXPECT_THAT(reported[0].message(), HasSubstr(d->utts()[c.victim].key));
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, BadDataTest, ::testing::ValuesIn(BadCases()),
                         [](const ::testing::TestParamInfo<BadCase>& info) {
                           return info.param.name;
                         });

TEST_F(DataSourceTest, DuplicateScpKeyIsSkippedOnce) {
  data_->utts().push_back(data_->utts()[2]);   // the same key again
  data_->utts().back().has_alignment = false;  // (one alignment for both)
  data_->Write();
  KaldiDataOptions o = OptionsFor(*data_);
  o.policy = BadDataPolicy::kRefuse;
  const absl::Status s = KaldiDataSource::Create(o).status();
  EXPECT_EQ(BadDataReasonOf(s), BadDataReason::kDuplicateKey);
  EXPECT_THAT(s.message(), HasSubstr("feats.scp line 13"));
  o.policy = BadDataPolicy::kSkip;
  auto source = KaldiDataSource::Create(o);
  ASSERT_TRUE(source.ok());
  auto utts = Pass(source->get(), 0);
  ASSERT_TRUE(utts.ok());
  EXPECT_EQ(utts->size(), static_cast<size_t>(TestDataDir::kUtterances));
  EXPECT_EQ((*source)->bad_data().Get(BadDataReason::kDuplicateKey), 1);
}

TEST_F(DataSourceTest, BadCmvnStatsDropTheirSpeaker) {
  // spk1's stats with a frame count of 0.
  data_->cmvn_override()["spk1"] =
      testing::DmObject(2, 4, {1, 2, 3, 0, 1, 1, 1, 0});
  data_->Write();
  KaldiDataOptions o = OptionsFor(*data_);
  o.policy = BadDataPolicy::kRefuse;
  const absl::Status s = KaldiDataSource::Create(o).status();
  EXPECT_EQ(BadDataReasonOf(s), BadDataReason::kBadCmvn);
  EXPECT_THAT(s.message(), HasSubstr("spk1-utt01"));
  EXPECT_THAT(s.message(), HasSubstr("cmvn.ark"));
  EXPECT_THAT(s.message(),
              HasSubstr(absl::StrCat("speaker spk1 (", data_->path("cmvn.scp"),
                                     " line 2)")));
  o.policy = BadDataPolicy::kSkip;
  auto source = KaldiDataSource::Create(o);
  ASSERT_TRUE(source.ok());
  auto utts = Pass(source->get(), 0);
  ASSERT_TRUE(utts.ok());
  for (const KaldiUtterance& u : *utts)
    EXPECT_THAT(u.key, ::testing::Not(HasSubstr("spk1")));
  EXPECT_EQ(utts->size(), 8u);
  EXPECT_EQ((*source)->bad_data().Get(BadDataReason::kBadCmvn), 4);
}

// The pooled statistics (the tools' default global CMVN) with a speaker
// whose frame count is 0: refused naming the speaker and cmvn.scp's line,
// or, under kSkip, pooled without that speaker, whose utterances the data
// source then skips and counts.
TEST_F(DataSourceTest, PooledStatsLeaveOutABadSpeakerUnderSkip) {
  data_->Write();
  auto all = PooledCmvnStats(data_->dir());
  ASSERT_TRUE(all.ok()) << all.status();
  data_->cmvn_override()["spk1"] =
      testing::DmObject(2, 4, {1, 2, 3, 0, 1, 1, 1, 0});
  data_->Write();
  const std::string cmvn_scp = data_->path("cmvn.scp");
  const std::string line2 = testing::ReadFile(cmvn_scp);
  absl::Status s = PooledCmvnStats(data_->dir()).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(BadDataReasonOf(s), BadDataReason::kBadCmvn) << s;
  EXPECT_THAT(s.message(), HasSubstr(absl::StrCat(cmvn_scp, " line 2 at byte ",
                                                  line2.find('\n') + 1,
                                                  ": bad_cmvn: "
                                                  "speaker spk1: ")));
  EXPECT_THAT(s.message(), HasSubstr("frame count of 0"));

  std::vector<absl::Status> left_out;
  auto pooled =
      PooledCmvnStats(data_->dir(), {}, "", BadDataPolicy::kSkip, &left_out);
  ASSERT_TRUE(pooled.ok()) << pooled.status();
  ASSERT_EQ(left_out.size(), 1u);
  EXPECT_EQ(BadDataReasonOf(left_out[0]), BadDataReason::kBadCmvn);
  EXPECT_THAT(left_out[0].message(), HasSubstr("speaker spk1"));
  int64_t frames_without_spk1 = 0;
  for (const UttSpec& u : data_->utts()) {
    if (u.speaker != "spk1") frames_without_spk1 += u.frames();
  }
  EXPECT_EQ(pooled->at(0, TestDataDir::kCols), frames_without_spk1);
  EXPECT_LT(pooled->at(0, TestDataDir::kCols), all->at(0, TestDataDir::kCols));

  KaldiDataOptions o = OptionsFor(*data_);
  o.policy = BadDataPolicy::kSkip;
  o.global_cmvn = *pooled;
  auto source = KaldiDataSource::Create(o);
  ASSERT_TRUE(source.ok()) << source.status();
  auto utts = Pass(source->get(), 0);
  ASSERT_TRUE(utts.ok()) << utts.status();
  EXPECT_EQ(utts->size(), 8u);
  EXPECT_EQ((*source)->bad_data().Get(BadDataReason::kBadCmvn), 4);

  // No usable speaker at all: an error under either policy.
  for (const char* spk : {"spk0", "spk2"}) {
    data_->cmvn_override()[spk] = data_->cmvn_override()["spk1"];
  }
  data_->Write();
  EXPECT_EQ(
      BadDataReasonOf(
          PooledCmvnStats(data_->dir(), {}, "", BadDataPolicy::kSkip).status()),
      BadDataReason::kBadCmvn);
}

// Statistics that blow the features up: spk1's variances are 0 (floored at
// 1e-20, a scale of 1e10), so with variance normalisation its features go
// far beyond the bound after CMVN, though they were fine as read.
TEST_F(DataSourceTest, FeaturesBeyondTheBoundAfterCmvnAreBadData) {
  data_->cmvn_override()["spk1"] =
      testing::DmObject(2, 4, {0, 0, 0, 1, 0, 0, 0, 0});
  data_->Write();
  KaldiDataOptions o = OptionsFor(*data_);
  o.norm_vars = true;
  o.policy = BadDataPolicy::kRefuse;
  auto source = KaldiDataSource::Create(o);
  ASSERT_TRUE(source.ok()) << source.status();
  const absl::Status s = Pass(source->get(), 0).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(BadDataReasonOf(s), BadDataReason::kFeatureMagnitude) << s;
  EXPECT_THAT(s.message(),
              HasSubstr(absl::StrCat(data_->path("feats.1.ark"), " at byte ",
                                     data_->offset("spk1-utt01"),
                                     " (utterance spk1-utt01)")));
  EXPECT_THAT(s.message(), HasSubstr("after the CMVN of speaker spk1"));
  o.policy = BadDataPolicy::kSkip;
  source = KaldiDataSource::Create(o);
  ASSERT_TRUE(source.ok());
  auto utts = Pass(source->get(), 0);
  ASSERT_TRUE(utts.ok()) << utts.status();
  EXPECT_EQ(utts->size(), 8u);
  EXPECT_EQ((*source)->bad_data().Get(BadDataReason::kFeatureMagnitude), 4);
  // Without variance normalisation the same statistics only shift them.
  o.norm_vars = false;
  source = KaldiDataSource::Create(o);
  ASSERT_TRUE(source.ok());
  utts = Pass(source->get(), 0);
  ASSERT_TRUE(utts.ok()) << utts.status();
  EXPECT_EQ(utts->size(), static_cast<size_t>(TestDataDir::kUtterances));
}

// The bound is an option: a tighter one refuses honest features too, and
// the statistics tell the largest |feature| read and handed out.
TEST_F(DataSourceTest, StatsTellTheLargestFeatureAgainstTheBound) {
  data_->Write();
  double max_read = 0, max_out = 0;
  for (const UttSpec& u : data_->utts()) {
    for (double v : u.read_values())
      max_read = std::max(max_read, std::fabs(v));
    for (double v : data_->Normalised(u, false)) {
      max_out = std::max(max_out, std::fabs(v));
    }
  }
  KaldiDataOptions o = OptionsFor(*data_);
  auto source = KaldiDataSource::Create(o);
  ASSERT_TRUE(source.ok());
  ASSERT_TRUE(Pass(source->get(), 0).ok());
  EXPECT_NEAR((*source)->stats().max_abs_feature_read, max_read, 1e-4);
  EXPECT_NEAR((*source)->stats().max_abs_feature, max_out, 1e-4);
  EXPECT_LT(max_read, 100);

  o.max_feature_magnitude = static_cast<float>(max_read) * 0.99f;
  source = KaldiDataSource::Create(o);
  ASSERT_TRUE(source.ok());
  EXPECT_EQ(BadDataReasonOf(Pass(source->get(), 0).status()),
            BadDataReason::kFeatureMagnitude);
  for (float bad : {0.0f, -1.0f, std::numeric_limits<float>::quiet_NaN()}) {
    o.max_feature_magnitude = bad;
    EXPECT_EQ(KaldiDataSource::Create(o).status().code(),
              absl::StatusCode::kInvalidArgument);
  }
}

// The dimension expected: given (a model's), every utterance of another one
// is bad data; given, and none of the first utterances has it, the data is
// of another kind altogether (an error under either policy, at Create).
TEST_F(DataSourceTest, GivenFeatureDimensionJudgesEveryUtterance) {
  data_->utts()[0].object = testing::FmObject(6, 4, Filled(24, 1.0f));
  data_->utts()[1].object = testing::FmObject(7, 4, Filled(28, 1.0f));
  data_->Write();
  KaldiDataOptions o = OptionsFor(*data_);
  o.policy = BadDataPolicy::kSkip;
  o.feature_dim = 3;
  auto source = KaldiDataSource::Create(o);
  ASSERT_TRUE(source.ok()) << source.status();
  auto utts = Pass(source->get(), 0);
  ASSERT_TRUE(utts.ok());
  EXPECT_EQ(utts->size(), static_cast<size_t>(TestDataDir::kUtterances - 2));
  EXPECT_EQ((*source)->bad_data().Get(BadDataReason::kDimMismatch), 2);
  o.feature_dim = 4;        // the two odd ones are right, the other ten are not
  o.cmvn = CmvnMode::kOff;  // (the speakers' statistics are of dimension 3)
  source = KaldiDataSource::Create(o);
  ASSERT_TRUE(source.ok());
  utts = Pass(source->get(), 0);
  ASSERT_TRUE(utts.ok());
  EXPECT_EQ(Keys(*utts),
            (std::vector<std::string>{"spk0-utt00", "spk1-utt01"}));
  for (BadDataPolicy policy : {BadDataPolicy::kRefuse, BadDataPolicy::kSkip}) {
    o.policy = policy;
    o.feature_dim = 40;
    const absl::Status s = KaldiDataSource::Create(o).status();
    EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
    EXPECT_FALSE(IsBadData(s));
    EXPECT_THAT(s.message(), HasSubstr("2 of dimension 4, 10 of dimension 3"));
  }
}

// Pipes and missing archives are not bad data: errors under either policy.
TEST_F(DataSourceTest, PipesAndMissingArchivesAreErrorsUnderEitherPolicy) {
  data_->utts()[3].scp_rx = "compute-fbank-feats scp:wav.scp ark:- |";
  data_->Write();
  for (BadDataPolicy policy : {BadDataPolicy::kRefuse, BadDataPolicy::kSkip}) {
    KaldiDataOptions o = OptionsFor(*data_);
    o.policy = policy;
    const absl::Status s = KaldiDataSource::Create(o).status();
    EXPECT_EQ(s.code(), absl::StatusCode::kUnimplemented);
    EXPECT_THAT(s.message(), HasSubstr("feats.scp line 4"));
  }
  data_->utts()[3].scp_rx = data_->path("gone.ark") + ":10";
  data_->Write();
  for (BadDataPolicy policy : {BadDataPolicy::kRefuse, BadDataPolicy::kSkip}) {
    KaldiDataOptions o = OptionsFor(*data_);
    o.policy = policy;
    // Found by Create (the first entries are read for the dimension) or,
    // further on, by Next.
    auto source = KaldiDataSource::Create(o);
    const absl::Status s =
        source.ok() ? Pass(source->get(), 0).status() : source.status();
    EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  }
}

// A feats.scp entry that names a FIFO (reading it would wait for a writer
// for good), a device or a directory; and a feats.scp that is itself a
// FIFO: refused at once under either policy (not bad data), naming
// feats.scp's line and the path.
TEST_F(DataSourceTest, NonRegularFilesAreRefusedNamingTheScpLine) {
  for (int i = 0; i < 6; ++i) {  // 18 utterances: more than are probed
    UttSpec u = data_->utts()[i];
    u.key += "-again";
    data_->utts().push_back(u);
  }
  const std::string fifo = data_->path("fifo.ark");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  for (const std::string& path :
       {fifo, std::string("/dev/zero"), data_->dir()}) {
    for (int victim : {0, 17}) {
      data_->utts()[victim].scp_rx = path;
      data_->Write();
      for (BadDataPolicy policy :
           {BadDataPolicy::kRefuse, BadDataPolicy::kSkip}) {
        KaldiDataOptions o = OptionsFor(*data_);
        o.policy = policy;
        // Found by Create (the first entries are read for the dimension)
        // or, further on, by Next.
        auto source = KaldiDataSource::Create(o);
        EXPECT_EQ(source.ok(), victim == 17) << source.status();
        const absl::Status s =
            source.ok() ? Pass(source->get(), 0).status() : source.status();
        EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
        EXPECT_FALSE(IsBadData(s)) << s;
        EXPECT_THAT(s.message(),
                    HasSubstr(absl::StrCat(
                        data_->path("feats.scp"), " line ", victim + 1,
                        " (utterance ", data_->utts()[victim].key, "): ", path,
                        ": not a regular file")));
      }
      data_->utts()[victim].scp_rx.clear();
    }
  }
  data_->Write();
  ASSERT_EQ(::unlink(data_->path("feats.scp").c_str()), 0);
  ASSERT_EQ(::mkfifo(data_->path("feats.scp").c_str(), 0600), 0);
  const absl::Status s = KaldiDataSource::Create(OptionsFor(*data_)).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr(data_->path("feats.scp") +
                                     ": not a regular file (a FIFO)"));
}

// A bigger corpus over several archives: the shuffle buffer stays within its
// byte budget, at most max_open_files archives are open, and every utterance
// comes out once per pass.
TEST(DataSourceMemoryTest, BoundedBufferAndOpenFiles) {
  const std::string dir =
      testing::MakeTempDir(::testing::TempDir(), "data_source_memory");
  const int kUtts = 150, kArchives = 5, kRows = 100, kCols = 40;
  std::vector<testing::TestArchive> arks(kArchives);
  std::string scp;
  testing::TestArchive ali;
  for (int i = 0; i < kUtts; ++i) {
    const std::string key = absl::StrCat("u", 1000 + i);
    std::vector<float> f(kRows * kCols, static_cast<float>(i));
    arks[i % kArchives].Add(key, testing::FmObject(kRows, kCols, f));
    ali.Add(key,
            testing::Int32VectorObject(std::vector<int32_t>(kRows, i % 7)));
  }
  for (int a = 0; a < kArchives; ++a) {
    testing::WriteFile(absl::StrCat(dir, "/f", a, ".ark"), arks[a].bytes());
  }
  for (int i = 0; i < kUtts; ++i) {
    const std::string key = absl::StrCat("u", 1000 + i);
    absl::StrAppend(&scp, key, " ", dir, "/f", i % kArchives,
                    ".ark:", arks[i % kArchives].offset(key), "\n");
  }
  testing::WriteFile(dir + "/feats.scp", scp);
  testing::WriteFile(dir + "/ali.ark", ali.bytes());
  KaldiDataOptions o;
  o.data_dir = dir;
  o.alignments = dir + "/ali.ark";
  o.temp_dir = ::testing::TempDir();
  o.shuffle = true;
  o.shuffle_buffer_utterances = 1000;
  const int64_t utt_bytes = kRows * kCols * 4 + kRows * 4 + 5;
  o.shuffle_buffer_bytes = 10 * utt_bytes;  // 10 of 150 utterances
  o.max_open_files = 2;
  auto source = KaldiDataSource::Create(o);
  ASSERT_TRUE(source.ok()) << source.status();
  KaldiUtterance u;
  for (uint64_t epoch = 0; epoch < 2; ++epoch) {
    (*source)->StartEpoch(epoch);
    std::set<std::string> seen;
    while (*(*source)->Next(&u)) {
      const KaldiDataStats s = (*source)->stats();
      ASSERT_LE(s.buffer_bytes, o.shuffle_buffer_bytes);
      ASSERT_LE(s.open_files, 2);
      EXPECT_EQ(u.features.data[0], std::stof(u.key.substr(1)) - 1000);
      EXPECT_TRUE(seen.insert(u.key).second);
    }
    EXPECT_EQ(seen.size(), static_cast<size_t>(kUtts));
  }
  const KaldiDataStats s = (*source)->stats();
  EXPECT_EQ(s.peak_buffer_utterances, 10);
  EXPECT_LE(s.peak_buffer_bytes, o.shuffle_buffer_bytes);
  EXPECT_EQ(s.utterances_read, 2 * kUtts);
  EXPECT_EQ(s.frames_read, 2 * kUtts * kRows);
}

}  // namespace
}  // namespace asgd::kaldi
