// libFuzzer target: the Kaldi archive readers (kaldi/object_reader,
// kaldi/archive_reader, kaldi/scp, kaldi/input_stream) over arbitrary bytes.
//
// Encoding: byte 0 selects a mode (v % 6), the rest is the input.
//   0  an archive of matrices (FM, DM, CM, CM2, CM3, text), read front to back
//   1  an archive of int32 vectors (alignments, binary or text)
//   2  an archive of float vectors (FV, DV, text)
//   3  a first line holding an rxfilename ("x.ark:OFFSET[r0:r1,c0:c1]"),
//      then the archive it points into: parse, seek, read, apply the range
//   4  an archive of int32 vectors read from a file, so that a gzip stream
//      (the input starting 1f 8b) is decompressed on the way
//   5  an archive of posteriors (binary with float or double weights, text)
// Reading is bounded: at most 1 Mi elements per object.
//
// Properties beyond "no crash, no out-of-bounds access, no undefined
// behaviour, no leak": every error from memory is kInvalidArgument with a
// BadDataReason, or kUnimplemented for pipe rxfilenames; an archive's first
// error is final; an accepted matrix holds rows × cols values within the
// limit; an accepted binary FM, FV or int32 vector re-encodes to exactly the
// input bytes it was read from; an accepted posterior holds at most the
// limit's pairs and re-encodes (EncodePosterior) to bytes that read back to
// the same ids and weight bits; an accepted compressed matrix decodes within
// its header's [min, min + range]; a range read yields exactly the
// selected rows and columns; accepted finite float matrices compress
// (EncodeCompressed) and decode back within the header's range.
#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "fuzz/fuzz_common.h"
#include "kaldi/archive_reader.h"
#include "kaldi/archive_writer.h"
#include "kaldi/bad_data.h"
#include "kaldi/compressed_matrix.h"
#include "kaldi/input_stream.h"
#include "kaldi/object_reader.h"
#include "kaldi/scp.h"

namespace asgd {
namespace fuzz {
namespace {

using kaldi::BadDataReason;
using kaldi::InputStream;
using kaldi::Matrix;
using kaldi::ObjectFormat;

kaldi::ReadLimits Limits() {
  kaldi::ReadLimits limits;
  limits.max_elements = 1 << 20;
  limits.max_key_bytes = 256;
  limits.max_text_line_bytes = 1 << 16;
  return limits;
}

void CheckBadData(const absl::Status& s) {
  FUZZ_CHECK(s.code() == absl::StatusCode::kInvalidArgument);
  FUZZ_CHECK(kaldi::BadDataReasonOf(s) != BadDataReason::kNone);
}

// The bytes [begin, end) of the input.
std::string Slice(const std::string& data, int64_t begin, int64_t end) {
  FUZZ_CHECK(begin >= 0 && begin <= end &&
             end <= static_cast<int64_t>(data.size()));
  return data.substr(begin, end - begin);
}

void CheckMatrix(const Matrix& m) {
  FUZZ_CHECK(m.rows >= 0 && m.cols >= 0);
  FUZZ_CHECK(static_cast<int64_t>(m.data.size()) == int64_t{m.rows} * m.cols);
  FUZZ_CHECK(static_cast<int64_t>(m.data.size()) <= Limits().max_elements);
}

// An accepted CM/CM2/CM3 object decodes within [min, min + range].
void CheckCompressedRange(const std::string& object, const Matrix& m) {
  const size_t space = object.find(' ');
  FUZZ_CHECK(space != std::string::npos);
  float min, range;
  std::memcpy(&min, object.data() + space + 1, 4);
  std::memcpy(&range, object.data() + space + 5, 4);
  if (!(std::fabs(min) < 1e30f && std::fabs(range) < 1e30f)) return;
  const double lo = std::min<double>(min, double{min} + range);
  const double hi = std::max<double>(min, double{min} + range);
  const double slack = 1e-5 * (std::fabs(min) + std::fabs(range)) + 1e-30;
  for (float v : m.data) FUZZ_CHECK(v >= lo - slack && v <= hi + slack);
}

// Finite accepted matrices compress (as the writer would) and decode back
// within the range of the header the encoder chose.
void CheckCompressRoundTrip(const Matrix& m) {
  for (float v : m.data) {
    if (!std::isfinite(v) || std::fabs(v) > 1e30f) return;
  }
  std::string out;
  const absl::Status s = kaldi::EncodeCompressed(
      m.data.data(), m.rows, m.cols, kaldi::CompressionMethod::kAuto, &out);
  if (!s.ok()) return;  // a value range beyond float: refused, fine
  auto in = InputStream::FromMemory("re-encoded", std::string("\0B", 2) + out);
  Matrix back;
  FUZZ_CHECK(kaldi::ReadMatrixObject(in.get(), Limits(), "", &back).ok());
  FUZZ_CHECK(back.rows == m.rows || m.data.empty());
  CheckMatrix(back);
  CheckCompressedRange(out, back);
}

// Reads a posterior at `in`; an accepted one must re-encode to bytes that
// read back bit for bit.
absl::Status CheckPosterior(InputStream* in, const std::string& key) {
  kaldi::Posterior post;
  absl::Status s = kaldi::ReadPosteriorObject(in, Limits(), key, &post);
  if (!s.ok()) return s;
  int64_t pairs = 0;
  for (const auto& frame : post) pairs += static_cast<int64_t>(frame.size());
  FUZZ_CHECK(pairs <= Limits().max_elements);
  std::string encoded;
  kaldi::EncodePosterior(post, &encoded);
  auto again = InputStream::FromMemory("again.ark", encoded);
  kaldi::Posterior back;
  FUZZ_CHECK(
      kaldi::ReadPosteriorObject(again.get(), Limits(), key, &back).ok());
  FUZZ_CHECK(back.size() == post.size());
  for (size_t f = 0; f < post.size(); ++f) {
    FUZZ_CHECK(back[f].size() == post[f].size());
    for (size_t i = 0; i < post[f].size(); ++i) {
      FUZZ_CHECK(back[f][i].first == post[f][i].first);
      FUZZ_CHECK(std::memcmp(&back[f][i].second, &post[f][i].second, 4) == 0);
    }
  }
  return s;
}

void Sequential(int mode, const std::string& data) {
  auto in = InputStream::FromMemory("fuzz.ark", data);
  const kaldi::ReadLimits limits = Limits();
  std::string key;
  while (true) {
    absl::StatusOr<bool> more = kaldi::ReadArchiveKey(in.get(), limits, &key);
    if (!more.ok()) {
      CheckBadData(more.status());
      return;
    }
    if (!*more) return;
    FUZZ_CHECK(!key.empty());
    const int64_t begin = in->position();
    ObjectFormat format;
    absl::Status s;
    std::string reencoded;
    if (mode == 0) {
      Matrix m;
      s = kaldi::ReadMatrixObject(in.get(), limits, key, &m, &format);
      if (s.ok()) {
        CheckMatrix(m);
        const std::string object = Slice(data, begin, in->position());
        if (format == ObjectFormat::kFloatMatrix) {
          FUZZ_CHECK(kaldi::EncodeMatrix(m.data.data(), m.rows, m.cols,
                                         kaldi::MatrixFormat::kFloat,
                                         &reencoded)
                         .ok());
          FUZZ_CHECK(reencoded == object);
        }
        if (format == ObjectFormat::kCompressedCM ||
            format == ObjectFormat::kCompressedCM2 ||
            format == ObjectFormat::kCompressedCM3) {
          CheckCompressedRange(object, m);
        }
        CheckCompressRoundTrip(m);
      }
    } else if (mode == 1) {
      std::vector<int32_t> v;
      s = kaldi::ReadInt32VectorObject(in.get(), limits, key, &v, &format);
      if (s.ok() && format == ObjectFormat::kInt32Vector) {
        kaldi::EncodeInt32Vector(v, &reencoded);
        FUZZ_CHECK(reencoded == Slice(data, begin, in->position()));
      }
    } else if (mode == 5) {
      s = CheckPosterior(in.get(), key);
    } else {
      std::vector<float> v;
      s = kaldi::ReadFloatVectorObject(in.get(), limits, key, &v, &format);
      if (s.ok())
        FUZZ_CHECK(static_cast<int64_t>(v.size()) <= limits.max_elements);
      if (s.ok() && format == ObjectFormat::kFloatVector) {
        kaldi::EncodeFloatVector(v, &reencoded);
        FUZZ_CHECK(reencoded == Slice(data, begin, in->position()));
      }
    }
    if (!s.ok()) {
      CheckBadData(s);
      return;  // archives cannot resynchronise
    }
  }
}

void RandomAccess(const std::string& data) {
  const size_t newline = data.find('\n');
  if (newline == std::string::npos) return;
  const std::string text = data.substr(0, newline);
  const std::string archive = data.substr(newline + 1);
  absl::StatusOr<kaldi::Rxfilename> rx =
      kaldi::ParseRxfilename(text, {"feats.scp", 0, 1, "k"});
  if (!rx.ok()) {
    FUZZ_CHECK(rx.status().code() == absl::StatusCode::kUnimplemented ||
               kaldi::BadDataReasonOf(rx.status()) ==
                   BadDataReason::kMalformedLine);
    return;
  }
  FUZZ_CHECK(!rx->path.empty() && rx->offset >= 0);
  auto in = InputStream::FromMemory(rx->path, archive);
  const absl::Status seek = in->Seek(rx->offset);
  if (!seek.ok()) {
    FUZZ_CHECK(seek.code() == absl::StatusCode::kOutOfRange);
    return;
  }
  Matrix m;
  absl::Status s = kaldi::ReadMatrixObject(in.get(), Limits(), "k", &m);
  if (!s.ok()) {
    CheckBadData(s);
    return;
  }
  CheckMatrix(m);
  if (!rx->has_range) return;
  const Matrix whole = m;
  s = kaldi::ApplyRange(rx->range, {rx->path, rx->offset, 0, "k"}, &m);
  if (!s.ok()) {
    FUZZ_CHECK(kaldi::BadDataReasonOf(s) == BadDataReason::kBadRange);
    return;
  }
  CheckMatrix(m);
  const kaldi::MatrixRange& r = rx->range;
  const int32_t r0 = r.row_last < 0 ? 0 : r.row_begin;
  const int32_t c0 = r.col_last < 0 ? 0 : r.col_begin;
  FUZZ_CHECK(r.row_last < 0 || m.rows <= r.row_last - r.row_begin + 1);
  FUZZ_CHECK(r.col_last < 0 || m.cols == r.col_last - r.col_begin + 1);
  for (int32_t i = 0; i < m.rows; ++i) {
    for (int32_t j = 0; j < m.cols; ++j) {
      const float a = m.at(i, j), b = whole.at(r0 + i, c0 + j);
      FUZZ_CHECK(std::memcmp(&a, &b, sizeof(float)) == 0);
    }
  }
}

// The file mode 4 writes, removed at exit.
const std::string& ScratchFile() {
  static const std::string* path = [] {
    const char* tmp = std::getenv("TMPDIR");
    auto* p = new std::string(std::string(tmp != nullptr ? tmp : "/tmp") +
                              "/kaldi_fuzzer.XXXXXX");
    const int fd = ::mkstemp(p->data());
    FUZZ_CHECK(fd >= 0);
    ::close(fd);
    std::atexit([] { std::remove(ScratchFile().c_str()); });
    return p;
  }();
  return *path;
}

// Through a file, so that gzip input goes through zlib.
void FromFile(const std::string& data) {
  const std::string& path = ScratchFile();
  FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) return;
  const bool written =
      std::fwrite(data.data(), 1, data.size(), f) == data.size();
  if (std::fclose(f) != 0 || !written) return;
  auto reader = kaldi::SequentialArchiveReader::Open(path, Limits());
  FUZZ_CHECK(reader.ok());
  std::vector<int32_t> v;
  while (true) {
    absl::StatusOr<bool> more = (*reader)->Next();
    if (!more.ok()) {
      CheckBadData(more.status());
      FUZZ_CHECK((*reader)->Next().status() == more.status());
      return;
    }
    if (!*more) return;
    const absl::Status s = (*reader)->ReadInt32Vector(&v);
    if (!s.ok()) {
      CheckBadData(s);
      FUZZ_CHECK((*reader)->Next().status() == s);
      return;
    }
    FUZZ_CHECK(static_cast<int64_t>(v.size()) <= Limits().max_elements);
  }
}

void Run(const uint8_t* bytes, size_t size) {
  if (size == 0) return;
  const int mode = bytes[0] % 6;
  const std::string data(reinterpret_cast<const char*>(bytes) + 1, size - 1);
  switch (mode) {
    case 0:
    case 1:
    case 2:
    case 5:
      Sequential(mode, data);
      break;
    case 3:
      RandomAccess(data);
      break;
    default:
      FromFile(data);
      break;
  }
}

}  // namespace
}  // namespace fuzz
}  // namespace asgd

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  asgd::fuzz::Run(data, size);
  return 0;
}
