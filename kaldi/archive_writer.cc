#include "kaldi/archive_writer.h"

#include <errno.h>
#include <unistd.h>
#include <zlib.h>

#include <cstdio>
#include <cstring>
#include <utility>

#include "absl/base/config.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "kaldi/input_stream.h"

#if !defined(ABSL_IS_LITTLE_ENDIAN)
#error "the Kaldi writers assume a little-endian host"
#endif

namespace asgd::kaldi {
namespace {

void AppendInt32(int32_t v, std::string* out) {
  out->push_back('\x04');
  out->append(reinterpret_cast<const char*>(&v), 4);
}

template <typename T>
void AppendRaw(const T* values, int64_t n, std::string* out) {
  out->append(reinterpret_cast<const char*>(values), n * sizeof(T));
}

absl::Status CheckKey(absl::string_view key) {
  if (key.empty()) return absl::InvalidArgumentError("empty archive key");
  for (char c : key) {
    if (absl::ascii_isspace(static_cast<unsigned char>(c))) {
      return absl::InvalidArgumentError(
          absl::StrCat("archive key \"", key, "\" contains whitespace"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

// A file written under a temporary name, plain or gzip'd, renamed into place
// by Commit() and removed when abandoned.
class AtomicFile {
 public:
  static absl::StatusOr<std::unique_ptr<AtomicFile>> Open(
      const std::string& path, bool gzip) {
    auto sink = std::unique_ptr<AtomicFile>(new AtomicFile(path));
    if (gzip) {
      sink->gz_ = gzopen(sink->tmp_.c_str(), "wb6");
      if (sink->gz_ == nullptr) return ErrnoStatus(sink->tmp_, "create", errno);
      gzbuffer(sink->gz_, 256 * 1024);
    } else {
      sink->file_ = std::fopen(sink->tmp_.c_str(), "wb");
      if (sink->file_ == nullptr) {
        return ErrnoStatus(sink->tmp_, "create", errno);
      }
      std::setvbuf(sink->file_, nullptr, _IOFBF, 1 << 20);
    }
    return sink;
  }
  ~AtomicFile() {
    if (file_ != nullptr || gz_ != nullptr) {
      Abandon();
    }
  }

  absl::Status Write(absl::string_view data) {
    if (data.empty()) return absl::OkStatus();
    if (gz_ != nullptr) {
      // gzwrite takes an unsigned length: write in pieces.
      while (!data.empty()) {
        const unsigned n = static_cast<unsigned>(
            std::min<size_t>(data.size(), size_t{1} << 30));
        if (gzwrite(gz_, data.data(), n) != static_cast<int>(n)) {
          int err;
          return absl::UnavailableError(
              absl::StrCat(tmp_, ": cannot write: ", gzerror(gz_, &err)));
        }
        data.remove_prefix(n);
      }
      return absl::OkStatus();
    }
    if (std::fwrite(data.data(), 1, data.size(), file_) != data.size()) {
      return ErrnoStatus(tmp_, "write", errno);
    }
    return absl::OkStatus();
  }

  // Flushes, closes and renames into place.
  absl::Status Commit() {
    if (gz_ != nullptr) {
      const int rc = gzclose(gz_);
      gz_ = nullptr;
      if (rc != Z_OK) {
        std::remove(tmp_.c_str());
        return absl::UnavailableError(absl::StrCat(tmp_, ": cannot close"));
      }
    } else {
      const bool ok = std::fflush(file_) == 0 && ::fsync(fileno(file_)) == 0;
      const int err = errno;
      const bool closed = std::fclose(file_) == 0;
      file_ = nullptr;
      if (!ok || !closed) {
        std::remove(tmp_.c_str());
        return ErrnoStatus(tmp_, "write", ok ? errno : err);
      }
    }
    if (std::rename(tmp_.c_str(), path_.c_str()) != 0) {
      const int err = errno;
      std::remove(tmp_.c_str());
      return ErrnoStatus(path_, "rename into", err);
    }
    return absl::OkStatus();
  }

  void Abandon() {
    if (gz_ != nullptr) gzclose(gz_);
    if (file_ != nullptr) std::fclose(file_);
    gz_ = nullptr;
    file_ = nullptr;
    std::remove(tmp_.c_str());
  }

 private:
  explicit AtomicFile(std::string path)
      : path_(std::move(path)), tmp_(absl::StrCat(path_, ".tmp")) {}

  std::string path_;
  std::string tmp_;
  std::FILE* file_ = nullptr;
  gzFile gz_ = nullptr;
};

absl::StatusOr<MatrixFormat> ParseMatrixFormat(absl::string_view text) {
  if (text == "fm") return MatrixFormat::kFloat;
  if (text == "compressed") return MatrixFormat::kCompressedAuto;
  if (text == "cm") return MatrixFormat::kCompressedCM;
  if (text == "cm2") return MatrixFormat::kCompressedCM2;
  if (text == "cm3") return MatrixFormat::kCompressedCM3;
  return absl::InvalidArgumentError(absl::StrCat(
      "matrix format must be fm, compressed, cm, cm2 or cm3, not \"", text,
      "\""));
}

absl::Status EncodeMatrix(const float* data, int32_t rows, int32_t cols,
                          MatrixFormat format, std::string* out) {
  if (rows < 0 || cols < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("matrix of ", rows, " x ", cols));
  }
  out->append("\0B", 2);
  if (format == MatrixFormat::kFloat) {
    out->append("FM ");
    AppendInt32(rows, out);
    AppendInt32(cols, out);
    AppendRaw(data, int64_t{rows} * cols, out);
    return absl::OkStatus();
  }
  const CompressionMethod method =
      format == MatrixFormat::kCompressedAuto ? CompressionMethod::kAuto
      : format == MatrixFormat::kCompressedCM
          ? CompressionMethod::kSpeechFeature
      : format == MatrixFormat::kCompressedCM2 ? CompressionMethod::kTwoByte
                                               : CompressionMethod::kOneByte;
  return EncodeCompressed(data, rows, cols, method, out);
}

void EncodeDoubleMatrix(const DoubleMatrix& m, std::string* out) {
  out->append("\0BDM ", 5);
  AppendInt32(m.rows, out);
  AppendInt32(m.cols, out);
  AppendRaw(m.data.data(), int64_t{m.rows} * m.cols, out);
}

void EncodeFloatVector(absl::Span<const float> v, std::string* out) {
  out->append("\0BFV ", 5);
  AppendInt32(static_cast<int32_t>(v.size()), out);
  AppendRaw(v.data(), static_cast<int64_t>(v.size()), out);
}

void EncodeInt32Vector(absl::Span<const int32_t> v, std::string* out) {
  out->append("\0B", 2);
  AppendInt32(static_cast<int32_t>(v.size()), out);
  out->reserve(out->size() + 5 * v.size());
  for (int32_t x : v) AppendInt32(x, out);
}

void EncodePosterior(const Posterior& post, std::string* out) {
  out->append("\0B", 2);
  AppendInt32(static_cast<int32_t>(post.size()), out);
  for (const auto& frame : post) {
    AppendInt32(static_cast<int32_t>(frame.size()), out);
    for (const auto& [id, weight] : frame) {
      AppendInt32(id, out);
      out->push_back('\x04');
      AppendRaw(&weight, 1, out);
    }
  }
}

absl::StatusOr<std::unique_ptr<ArchiveWriter>> ArchiveWriter::Create(
    const ArchiveWriterOptions& options) {
  if (options.ark_path.empty()) {
    return absl::InvalidArgumentError("ArchiveWriter: no ark_path");
  }
  const bool gzip = absl::EndsWith(options.ark_path, ".gz");
  if (gzip && !options.scp_path.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        options.ark_path,
        ": a gzip'd archive cannot have an scp (offsets would point into "
        "compressed data)"));
  }
  auto ark = AtomicFile::Open(options.ark_path, gzip);
  if (!ark.ok()) return ark.status();
  std::unique_ptr<AtomicFile> scp;
  if (!options.scp_path.empty()) {
    auto opened = AtomicFile::Open(options.scp_path, false);
    if (!opened.ok()) return opened.status();
    scp = *std::move(opened);
  }
  return std::unique_ptr<ArchiveWriter>(
      new ArchiveWriter(options, *std::move(ark), std::move(scp)));
}

ArchiveWriter::ArchiveWriter(ArchiveWriterOptions options,
                             std::unique_ptr<AtomicFile> ark,
                             std::unique_ptr<AtomicFile> scp)
    : options_(std::move(options)), ark_(std::move(ark)), scp_(std::move(scp)) {
  if (options_.scp_ark_name.empty()) options_.scp_ark_name = options_.ark_path;
}

ArchiveWriter::~ArchiveWriter() = default;

absl::Status ArchiveWriter::WriteEntry(absl::string_view key,
                                       const std::string& object) {
  std::string head = absl::StrCat(key, " ");
  absl::Status s = ark_->Write(head);
  if (s.ok()) s = ark_->Write(object);
  if (s.ok() && scp_ != nullptr) {
    s = scp_->Write(absl::StrCat(key, " ", options_.scp_ark_name, ":",
                                 offset_ + static_cast<int64_t>(head.size()),
                                 "\n"));
  }
  if (!s.ok()) {
    failed_ = s;
    return s;
  }
  offset_ += static_cast<int64_t>(head.size() + object.size());
  ++entries_;
  return absl::OkStatus();
}

absl::Status ArchiveWriter::BeginEntry(absl::string_view key) {
  if (closed_) {
    return absl::FailedPreconditionError(
        absl::StrCat(options_.ark_path, ": write after Close()"));
  }
  if (!failed_.ok()) return failed_;
  object_.clear();
  return CheckKey(key);
}

absl::Status ArchiveWriter::WriteMatrix(absl::string_view key,
                                        const float* data, int32_t rows,
                                        int32_t cols) {
  if (absl::Status s = BeginEntry(key); !s.ok()) return s;
  absl::Status s =
      EncodeMatrix(data, rows, cols, options_.matrix_format, &object_);
  if (!s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        options_.ark_path, " (utterance ", key, "): ", s.message()));
  }
  return WriteEntry(key, object_);
}

absl::Status ArchiveWriter::WriteDoubleMatrix(absl::string_view key,
                                              const DoubleMatrix& m) {
  if (absl::Status s = BeginEntry(key); !s.ok()) return s;
  EncodeDoubleMatrix(m, &object_);
  return WriteEntry(key, object_);
}

absl::Status ArchiveWriter::WriteFloatVector(absl::string_view key,
                                             absl::Span<const float> v) {
  if (absl::Status s = BeginEntry(key); !s.ok()) return s;
  EncodeFloatVector(v, &object_);
  return WriteEntry(key, object_);
}

absl::Status ArchiveWriter::WriteInt32Vector(absl::string_view key,
                                             absl::Span<const int32_t> v) {
  if (absl::Status s = BeginEntry(key); !s.ok()) return s;
  EncodeInt32Vector(v, &object_);
  return WriteEntry(key, object_);
}

absl::Status ArchiveWriter::WritePosterior(absl::string_view key,
                                           const Posterior& post) {
  if (absl::Status s = BeginEntry(key); !s.ok()) return s;
  EncodePosterior(post, &object_);
  return WriteEntry(key, object_);
}

absl::Status ArchiveWriter::Close() {
  if (closed_) return failed_;
  closed_ = true;
  if (!failed_.ok()) {
    ark_->Abandon();
    if (scp_ != nullptr) scp_->Abandon();
    return failed_;
  }
  absl::Status s = ark_->Commit();
  if (s.ok() && scp_ != nullptr) s = scp_->Commit();
  if (!s.ok() && scp_ != nullptr) scp_->Abandon();
  failed_ = s;
  return s;
}

absl::Status WriteFileAtomically(const std::string& path,
                                 absl::string_view data) {
  ASGD_ASSIGN_OR_RETURN(auto sink, AtomicFile::Open(path, /*gzip=*/false));
  ASGD_RETURN_IF_ERROR(sink->Write(data));
  return sink->Commit();
}

absl::Status WriteFloatVectorFile(const std::string& path,
                                  absl::Span<const float> v, bool binary) {
  std::string out;
  if (binary) {
    EncodeFloatVector(v, &out);
  } else {
    out = " [ ";
    for (float x : v) absl::StrAppendFormat(&out, "%.9g ", x);
    out += "]\n";
  }
  return WriteFileAtomically(path, out);
}

absl::Status WriteDoubleVectorFile(const std::string& path,
                                   absl::Span<const double> v, bool binary) {
  std::string out;
  if (binary) {
    out.append("\0BDV ", 5);
    AppendInt32(static_cast<int32_t>(v.size()), &out);
    AppendRaw(v.data(), static_cast<int64_t>(v.size()), &out);
  } else {
    out = " [ ";
    for (double x : v) absl::StrAppendFormat(&out, "%.17g ", x);
    out += "]\n";
  }
  return WriteFileAtomically(path, out);
}

}  // namespace asgd::kaldi
