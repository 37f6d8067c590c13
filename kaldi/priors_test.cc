#include "kaldi/priors.h"

#include <cmath>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "kaldi/test_archive.h"

namespace asgd::kaldi {
namespace {

class PriorsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::MakeTempDir(::testing::TempDir(), "priors");
    testing::TestArchive a;
    a.Add("u1", testing::Int32VectorObject({0, 0, 2, 2, 2}));
    a.Add("u2", testing::Int32VectorObject({4}));
    ASSERT_TRUE(testing::WriteGzipFile(dir_ + "/pdf.1.gz", a.bytes()));
    testing::WriteFile(dir_ + "/pdf.2.txt", "u3 2 0\n");
  }
  std::vector<std::string> Files() {
    return {dir_ + "/pdf.1.gz", dir_ + "/pdf.2.txt"};
  }
  std::string dir_;
};

TEST_F(PriorsTest, CountsLikeAnalyzeCounts) {
  auto c = CountPdfs(Files(), 0, BadDataPolicy::kRefuse);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->counts, std::vector<int64_t>({3, 0, 4, 0, 1}));
  EXPECT_EQ(c->utterances, 3);
  EXPECT_EQ(c->frames, 8);
  c = CountPdfs(Files(), 7, BadDataPolicy::kRefuse);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->counts.size(), 7u);
  // A label beyond the class count: refused, or that alignment skipped.
  EXPECT_EQ(
      BadDataReasonOf(CountPdfs(Files(), 4, BadDataPolicy::kRefuse).status()),
      BadDataReason::kLabelOutOfRange);
  c = CountPdfs(Files(), 4, BadDataPolicy::kSkip);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->counts, std::vector<int64_t>({3, 0, 4, 0}));
  EXPECT_EQ(c->bad.Get(BadDataReason::kLabelOutOfRange), 1);
}

TEST(PriorsMathTest, PriorsLogPriorsAndPseudoLikelihoods) {
  const std::vector<float> priors = PriorsFromCounts({3, 0, 4, 1});
  EXPECT_EQ(priors, std::vector<float>({0.375f, 0.0f, 0.5f, 0.125f}));
  const std::vector<float> log_priors = LogPriors(priors);
  EXPECT_FLOAT_EQ(log_priors[0], std::log(0.375f));
  EXPECT_GT(log_priors[1], 1e18f);  // never seen: effectively excluded
  Matrix post;
  post.Resize(2, 4);
  post.data = {-1, -2, -3, -4, -5, -6, -7, -8};
  SubtractLogPriors(log_priors, &post);
  EXPECT_FLOAT_EQ(post.at(1, 2), -7 - std::log(0.5f));
  EXPECT_LT(post.at(0, 1), -1e18f);
  EXPECT_EQ(PriorsFromCounts({0, 0}), std::vector<float>({0, 0}));
}

}  // namespace
}  // namespace asgd::kaldi
