#include "kaldi/archive_reader.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "kaldi/bad_data.h"

namespace asgd::kaldi {
namespace {

// Random-access reads move between objects: a small buffer wastes less on
// each seek; large objects bypass it anyway.
constexpr size_t kRandomAccessBufferBytes = 64 * 1024;

}  // namespace

absl::StatusOr<std::unique_ptr<SequentialArchiveReader>>
SequentialArchiveReader::Open(const std::string& path,
                              const ReadLimits& limits) {
  auto in = InputStream::OpenSequential(path);
  if (!in.ok()) return in.status();
  return std::make_unique<SequentialArchiveReader>(*std::move(in), limits);
}

SequentialArchiveReader::SequentialArchiveReader(
    std::unique_ptr<InputStream> in, const ReadLimits& limits)
    : in_(std::move(in)), limits_(limits) {}

absl::StatusOr<bool> SequentialArchiveReader::Next() {
  if (!failed_.ok()) return failed_;
  if (pending_) {
    return absl::FailedPreconditionError(absl::StrCat(
        path(), ": Next() before the object of \"", key_, "\" was read"));
  }
  absl::StatusOr<bool> more = ReadArchiveKey(in_.get(), limits_, &key_);
  if (!more.ok()) {
    failed_ = more.status();
    return failed_;
  }
  object_offset_ = in_->position();
  pending_ = *more;
  return *more;
}

absl::Status SequentialArchiveReader::BeginRead() {
  if (!failed_.ok()) return failed_;
  if (!pending_) {
    return absl::FailedPreconditionError(
        absl::StrCat(path(), ": read without a key from Next()"));
  }
  pending_ = false;
  return absl::OkStatus();
}

absl::Status SequentialArchiveReader::EndRead(absl::Status status) {
  if (!status.ok()) failed_ = status;
  return status;
}

absl::Status SequentialArchiveReader::ReadMatrix(Matrix* out,
                                                 ObjectFormat* format) {
  absl::Status s = BeginRead();
  if (!s.ok()) return s;
  return EndRead(ReadMatrixObject(in_.get(), limits_, key_, out, format));
}

absl::Status SequentialArchiveReader::ReadFloatVector(std::vector<float>* out) {
  absl::Status s = BeginRead();
  if (!s.ok()) return s;
  return EndRead(ReadFloatVectorObject(in_.get(), limits_, key_, out));
}

absl::Status SequentialArchiveReader::ReadInt32Vector(std::vector<int32_t>* out,
                                                      ObjectFormat* format) {
  absl::Status s = BeginRead();
  if (!s.ok()) return s;
  return EndRead(ReadInt32VectorObject(in_.get(), limits_, key_, out, format));
}

absl::Status SequentialArchiveReader::ReadPosterior(Posterior* out,
                                                    ObjectFormat* format) {
  absl::Status s = BeginRead();
  if (!s.ok()) return s;
  return EndRead(ReadPosteriorObject(in_.get(), limits_, key_, out, format));
}

RxfilenameReader::RxfilenameReader(int max_open_files, const ReadLimits& limits)
    : max_open_files_(std::max(1, max_open_files)), limits_(limits) {}

RxfilenameReader::~RxfilenameReader() = default;

absl::StatusOr<InputStream*> RxfilenameReader::Position(const Rxfilename& rx,
                                                        absl::string_view key) {
  ++clock_;
  OpenFile* file = nullptr;
  for (OpenFile& f : files_) {
    if (f.path == rx.path) {
      file = &f;
      break;
    }
  }
  if (file == nullptr) {
    auto stream = InputStream::OpenFile(rx.path, kRandomAccessBufferBytes);
    if (!stream.ok()) return stream.status();
    ++total_opens_;
    if (static_cast<int>(files_.size()) >= max_open_files_) {
      auto lru = std::min_element(files_.begin(), files_.end(),
                                  [](const OpenFile& a, const OpenFile& b) {
                                    return a.last_use < b.last_use;
                                  });
      files_.erase(lru);
    }
    files_.push_back(OpenFile{rx.path, *std::move(stream), 0});
    file = &files_.back();
  }
  file->last_use = clock_;
  InputStream* in = file->stream.get();
  if (rx.has_offset && rx.offset >= in->size()) {
    return BadDataError(
        BadDataReason::kOffsetPastEnd,
        {rx.path, rx.offset, 0, std::string(key)},
        absl::StrCat("the offset is at or past the end of the archive (",
                     in->size(), " bytes)"));
  }
  absl::Status s = in->Seek(rx.offset);
  if (!s.ok()) return s;
  return in;
}

absl::Status RxfilenameReader::ReadMatrix(const Rxfilename& rx,
                                          absl::string_view key, Matrix* out,
                                          ObjectFormat* format) {
  auto in = Position(rx, key);
  if (!in.ok()) return in.status();
  absl::Status s = ReadMatrixObject(*in, limits_, key, out, format);
  if (!s.ok() || !rx.has_range) return s;
  return ApplyRange(rx.range, {rx.path, rx.offset, 0, std::string(key)}, out);
}

absl::Status RxfilenameReader::ReadMatrix(const Rxfilename& rx,
                                          absl::string_view key,
                                          DoubleMatrix* out) {
  if (rx.has_range) {
    return BadDataError(BadDataReason::kBadRange,
                        {rx.path, rx.offset, 0, std::string(key)},
                        "a range is not supported for statistics");
  }
  auto in = Position(rx, key);
  if (!in.ok()) return in.status();
  return ReadMatrixObject(*in, limits_, key, out);
}

namespace {

// Reads the one object of the file at `path` with `read` (an object reader
// of object_reader.h), then checks that only whitespace follows.
template <typename T, typename Read>
absl::StatusOr<T> ReadObjectFile(const std::string& path,
                                 const ReadLimits& limits, Read read) {
  auto in = InputStream::OpenSequential(path);
  if (!in.ok()) return in.status();
  T value;
  absl::Status s = read(in->get(), limits, "", &value, nullptr);
  if (!s.ok()) return s;
  for (int c = (*in)->Peek(); c >= 0; c = (*in)->Peek()) {
    if (c != ' ' && c != '\t' && c != '\n' && c != '\r') {
      return BadDataError(BadDataReason::kMalformedObject,
                          {path, (*in)->position()},
                          "more data after the object");
    }
    (*in)->Get();
  }
  return value;
}

}  // namespace

absl::StatusOr<std::vector<float>> ReadFloatVectorFile(
    const std::string& path, const ReadLimits& limits) {
  return ReadObjectFile<std::vector<float>>(
      path, limits,
      [](InputStream* in, const ReadLimits& l, absl::string_view key,
         std::vector<float>* out, ObjectFormat* format) {
        return ReadFloatVectorObject(in, l, key, out, format);
      });
}

absl::StatusOr<DoubleMatrix> ReadDoubleMatrixFile(const std::string& path,
                                                  const ReadLimits& limits) {
  return ReadObjectFile<DoubleMatrix>(
      path, limits,
      [](InputStream* in, const ReadLimits& l, absl::string_view key,
         DoubleMatrix* out, ObjectFormat* format) {
        return ReadMatrixObject(in, l, key, out, format);
      });
}

}  // namespace asgd::kaldi
