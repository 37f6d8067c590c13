#include "kaldi/input_stream.h"

#include <sys/stat.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kaldi/bad_data.h"
#include "kaldi/test_archive.h"

namespace asgd::kaldi {
namespace {

std::string Pattern(size_t n) {
  std::string s(n, '\0');
  for (size_t i = 0; i < n; ++i)
    s[i] = static_cast<char>((i * 7 + i / 251) & 0xff);
  return s;
}

class InputStreamTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::MakeTempDir(::testing::TempDir(), "input_stream");
  }
  std::string dir_;
};

TEST_F(InputStreamTest, ReadsSeeksAndTracksPositions) {
  const std::string data = Pattern(100000);
  testing::WriteFile(dir_ + "/f", data);
  auto in = InputStream::OpenFile(dir_ + "/f", /*buffer_bytes=*/4096);
  ASSERT_TRUE(in.ok()) << in.status();
  InputStream& s = **in;
  EXPECT_EQ(s.size(), 100000);
  EXPECT_EQ(s.Get(), static_cast<unsigned char>(data[0]));
  std::string got(50000, '\0');  // larger than the buffer: bypasses it
  EXPECT_EQ(s.Read(got.data(), got.size()), got.size());
  EXPECT_EQ(got, data.substr(1, 50000));
  EXPECT_EQ(s.position(), 50001);
  ASSERT_TRUE(s.Seek(99990).ok());
  EXPECT_EQ(s.remaining(), 10);
  std::string tail(20, '\0');
  EXPECT_EQ(s.Read(tail.data(), 20), 10u);  // short at the end
  EXPECT_TRUE(s.io_status().ok());
  EXPECT_EQ(s.Peek(), -1);
  ASSERT_TRUE(s.Seek(3).ok());  // back, and within a fresh buffer
  EXPECT_EQ(s.Get(), static_cast<unsigned char>(data[3]));
  ASSERT_TRUE(s.Seek(10).ok());
  EXPECT_EQ(s.Get(), static_cast<unsigned char>(data[10]));
  EXPECT_EQ(s.Seek(100001).code(), absl::StatusCode::kOutOfRange);
}

TEST_F(InputStreamTest, OpenErrorsHaveIoCodes) {
  EXPECT_EQ(InputStream::OpenFile(dir_ + "/missing").status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(InputStream::OpenFile(dir_).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// A FIFO with no writer (opening it for reading would block for good), a
// symbolic link to one, a device and a directory: refused at once, by
// either opener, as not regular files (not bad data, so never skipped).
TEST_F(InputStreamTest, NonRegularFilesAreRefusedWithoutBlocking) {
  const std::string fifo = dir_ + "/feats.ark";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const std::string link = dir_ + "/link.ark";
  ASSERT_EQ(::symlink(fifo.c_str(), link.c_str()), 0);
  for (const std::string& path : {fifo, link, std::string("/dev/null"), dir_}) {
    for (bool sequential : {false, true}) {
      const absl::Status s = sequential
                                 ? InputStream::OpenSequential(path).status()
                                 : InputStream::OpenFile(path).status();
      EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
      EXPECT_FALSE(IsBadData(s)) << s;
      EXPECT_THAT(s.message(),
                  ::testing::HasSubstr(path + ": not a regular file ("));
    }
  }
  EXPECT_THAT(InputStream::OpenFile(fifo).status().message(),
              ::testing::HasSubstr("(a FIFO)"));
}

TEST_F(InputStreamTest, GzipIsDetectedByItsMagicAndCannotSeek) {
  const std::string data = Pattern(300000);
  ASSERT_TRUE(testing::WriteGzipFile(dir_ + "/z", data));  // no .gz suffix
  auto in = InputStream::OpenSequential(dir_ + "/z");
  ASSERT_TRUE(in.ok());
  EXPECT_TRUE((*in)->gzip());
  EXPECT_EQ((*in)->size(), -1);
  std::string got(data.size() + 10, '\0');
  EXPECT_EQ((*in)->Read(got.data(), got.size()), data.size());
  got.resize(data.size());
  EXPECT_EQ(got, data);
  EXPECT_TRUE((*in)->io_status().ok());
  EXPECT_EQ((*in)->Seek(0).code(), absl::StatusCode::kFailedPrecondition);
  // A plain file through OpenSequential is seekable.
  testing::WriteFile(dir_ + "/p", data);
  auto plain = InputStream::OpenSequential(dir_ + "/p");
  ASSERT_TRUE(plain.ok());
  EXPECT_FALSE((*plain)->gzip());
  EXPECT_EQ((*plain)->size(), 300000);
}

TEST_F(InputStreamTest, TruncatedAndCorruptGzipAreBadData) {
  const std::string data = Pattern(200000);
  ASSERT_TRUE(testing::WriteGzipFile(dir_ + "/z.gz", data));
  const std::string gz = testing::ReadFile(dir_ + "/z.gz");
  testing::WriteFile(dir_ + "/cut.gz", gz.substr(0, gz.size() / 2));
  auto in = InputStream::OpenSequential(dir_ + "/cut.gz");
  ASSERT_TRUE(in.ok());
  std::string got(data.size(), '\0');
  EXPECT_LT((*in)->Read(got.data(), got.size()), data.size());
  EXPECT_EQ(BadDataReasonOf((*in)->io_status()), BadDataReason::kTruncated);

  std::string corrupt = gz;
  for (size_t i = 20; i < 60; ++i) corrupt[i] = static_cast<char>(~corrupt[i]);
  testing::WriteFile(dir_ + "/bad.gz", corrupt);
  in = InputStream::OpenSequential(dir_ + "/bad.gz");
  ASSERT_TRUE(in.ok());
  EXPECT_LT((*in)->Read(got.data(), got.size()), data.size());
  EXPECT_TRUE(IsBadData((*in)->io_status())) << (*in)->io_status();
}

TEST_F(InputStreamTest, MemoryStreamsOwnTheirData) {
  auto in = InputStream::FromMemory("m", std::string("abc"));
  EXPECT_EQ(in->name(), "m");
  EXPECT_EQ(in->Get(), 'a');
  ASSERT_TRUE(in->Seek(2).ok());
  EXPECT_EQ(in->Get(), 'c');
  EXPECT_EQ(in->Get(), -1);
}

}  // namespace
}  // namespace asgd::kaldi
