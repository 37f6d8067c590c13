#include "kaldi/input_stream.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "kaldi/bad_data.h"

namespace asgd::kaldi {
namespace {

// Plain file: read(2) and lseek(2) on a descriptor.
class FdStream : public InputStream {
 public:
  FdStream(std::string name, int fd, int64_t size, size_t buffer_bytes)
      : InputStream(std::move(name), size, false, buffer_bytes), fd_(fd) {}
  ~FdStream() override { ::close(fd_); }

 protected:
  int64_t RawRead(char* dst, size_t n) override {
    while (true) {
      const ssize_t got = ::read(fd_, dst, n);
      if (got >= 0) return got;
      if (errno == EINTR) continue;
      io_status_ = ErrnoStatus(name(), "read", errno);
      return -1;
    }
  }
  absl::Status RawSeek(int64_t offset) override {
    if (::lseek(fd_, offset, SEEK_SET) < 0) {
      return ErrnoStatus(name(), "seek in", errno);
    }
    return absl::OkStatus();
  }

 private:
  int fd_;
};

// gzip: zlib's gzread over a descriptor. A truncated stream reads as
// Z_BUF_ERROR, corrupt data as Z_DATA_ERROR.
class GzipStream : public InputStream {
 public:
  GzipStream(std::string name, gzFile file, size_t buffer_bytes)
      : InputStream(std::move(name), -1, true, buffer_bytes), file_(file) {}
  ~GzipStream() override { gzclose(file_); }

 protected:
  int64_t RawRead(char* dst, size_t n) override {
    const unsigned want =
        static_cast<unsigned>(std::min<size_t>(n, size_t{1} << 30));
    const int got = gzread(file_, dst, want);
    int err = Z_OK;
    const char* text = gzerror(file_, &err);
    if (got >= 0 && err == Z_OK) return got;
    // Keep what was decompressed; report the error on the next call.
    if (got > 0) return got;
    const DataLocation where{name(), position()};
    if (err == Z_BUF_ERROR) {
      io_status_ = BadDataError(BadDataReason::kTruncated, where,
                                "the gzip stream ends early");
    } else if (err == Z_DATA_ERROR) {
      io_status_ = BadDataError(BadDataReason::kMalformedObject, where,
                                absl::StrCat("corrupt gzip data: ", text));
    } else if (err == Z_ERRNO) {
      io_status_ = ErrnoStatus(name(), "read", errno);
    } else {
      io_status_ = absl::UnavailableError(
          absl::StrCat(name(), ": cannot decompress: ", text));
    }
    return -1;
  }
  absl::Status RawSeek(int64_t) override {
    return absl::FailedPreconditionError(
        absl::StrCat(name(), ": a gzip stream cannot seek"));
  }

 private:
  gzFile file_;
};

class MemoryStream : public InputStream {
 public:
  MemoryStream(std::string name, std::string data)
      : InputStream(std::move(name), static_cast<int64_t>(data.size()), false,
                    4096),
        data_(std::move(data)) {}

 protected:
  int64_t RawRead(char* dst, size_t n) override {
    const size_t take = std::min(n, data_.size() - pos_);
    if (take > 0) std::memcpy(dst, data_.data() + pos_, take);
    pos_ += take;
    return static_cast<int64_t>(take);
  }
  absl::Status RawSeek(int64_t offset) override {
    pos_ = static_cast<size_t>(offset);
    return absl::OkStatus();
  }

 private:
  std::string data_;
  size_t pos_ = 0;
};

// What a file that is not a regular one is, for messages.
const char* FileKind(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

absl::Status NotRegular(const std::string& path, mode_t mode) {
  return absl::InvalidArgumentError(
      absl::StrCat(path, ": not a regular file (", FileKind(mode),
                   "); refused without reading it"));
}

}  // namespace

absl::Status ErrnoStatus(const std::string& path, absl::string_view action,
                         int err) {
  const std::string message =
      absl::StrCat(path, ": cannot ", action, ": ", std::strerror(err));
  if (err == ENOENT) return absl::NotFoundError(message);
  if (err == EACCES || err == EPERM) {
    return absl::PermissionDeniedError(message);
  }
  return absl::UnavailableError(message);
}

absl::StatusOr<int> OpenRegular(const std::string& path, int64_t* size) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return ErrnoStatus(path, "open", errno);
  if (!S_ISREG(st.st_mode)) return NotRegular(path, st.st_mode);
  int fd;
  do {
    fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  } while (fd < 0 && errno == EINTR);
  if (fd < 0) return ErrnoStatus(path, "open", errno);
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    return ErrnoStatus(path, "stat", err);
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return NotRegular(path, st.st_mode);
  }
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags < 0 || ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) < 0) {
    const int err = errno;
    ::close(fd);
    return ErrnoStatus(path, "open", err);
  }
  *size = st.st_size;
  return fd;
}

InputStream::InputStream(std::string name, int64_t size, bool gzip,
                         size_t buffer_bytes)
    : name_(std::move(name)),
      size_(size),
      gzip_(gzip),
      buffer_(std::max<size_t>(buffer_bytes, 16)) {}

InputStream::~InputStream() = default;

absl::StatusOr<std::unique_ptr<InputStream>> InputStream::OpenFile(
    const std::string& path, size_t buffer_bytes) {
  int64_t size = 0;
  auto fd = OpenRegular(path, &size);
  if (!fd.ok()) return fd.status();
  return std::unique_ptr<InputStream>(
      new FdStream(path, *fd, size, buffer_bytes));
}

absl::StatusOr<std::unique_ptr<InputStream>> InputStream::OpenSequential(
    const std::string& path, size_t buffer_bytes) {
  int64_t size = 0;
  auto fd = OpenRegular(path, &size);
  if (!fd.ok()) return fd.status();
  unsigned char magic[2] = {0, 0};
  ssize_t got;
  do {
    got = ::pread(*fd, magic, 2, 0);
  } while (got < 0 && errno == EINTR);
  if (got < 0) {
    const int err = errno;
    ::close(*fd);
    return ErrnoStatus(path, "read", err);
  }
  if (got < 2 || magic[0] != 0x1f || magic[1] != 0x8b) {
    return std::unique_ptr<InputStream>(
        new FdStream(path, *fd, size, buffer_bytes));
  }
  gzFile file = gzdopen(*fd, "rb");
  if (file == nullptr) {
    ::close(*fd);
    return absl::ResourceExhaustedError(
        absl::StrCat(path, ": cannot start gzip decompression"));
  }
  gzbuffer(file, 128 * 1024);
  return std::unique_ptr<InputStream>(new GzipStream(path, file, buffer_bytes));
}

std::unique_ptr<InputStream> InputStream::FromMemory(std::string name,
                                                     std::string data) {
  return std::unique_ptr<InputStream>(
      new MemoryStream(std::move(name), std::move(data)));
}

absl::Status InputStream::Seek(int64_t offset) {
  if (!seekable()) {
    return absl::FailedPreconditionError(
        absl::StrCat(name_, ": cannot seek in a gzip stream"));
  }
  if (offset < 0 || offset > size_) {
    return absl::OutOfRangeError(absl::StrCat(name_, ": offset ", offset,
                                              " is outside the file (", size_,
                                              " bytes)"));
  }
  // Within the buffered bytes: move the cursor only.
  const int64_t buffer_begin_pos = buffer_end_pos_ - static_cast<int64_t>(end_);
  if (offset >= buffer_begin_pos && offset <= buffer_end_pos_ &&
      io_status_.ok()) {
    begin_ = static_cast<size_t>(offset - buffer_begin_pos);
    return absl::OkStatus();
  }
  const absl::Status s = RawSeek(offset);
  if (!s.ok()) return s;
  begin_ = end_ = 0;
  buffer_end_pos_ = offset;
  io_status_ = absl::OkStatus();
  return absl::OkStatus();
}

bool InputStream::Fill() {
  if (!io_status_.ok()) return false;
  begin_ = end_ = 0;
  const int64_t got = RawRead(buffer_.data(), buffer_.size());
  if (got <= 0) return false;
  end_ = static_cast<size_t>(got);
  buffer_end_pos_ += got;
  return true;
}

size_t InputStream::Read(void* dst, size_t n) {
  char* out = static_cast<char*>(dst);
  size_t done = 0;
  while (done < n) {
    if (begin_ < end_) {
      const size_t take = std::min(n - done, end_ - begin_);
      std::memcpy(out + done, buffer_.data() + begin_, take);
      begin_ += take;
      done += take;
      continue;
    }
    if (!io_status_.ok()) break;
    if (n - done >= buffer_.size()) {
      // Large read: straight into the destination.
      const int64_t got = RawRead(out + done, n - done);
      if (got <= 0) break;
      buffer_end_pos_ += got;
      begin_ = end_ = 0;
      done += static_cast<size_t>(got);
    } else if (!Fill()) {
      break;
    }
  }
  return done;
}

}  // namespace asgd::kaldi
