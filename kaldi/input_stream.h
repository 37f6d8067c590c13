// InputStream: buffered byte input from a plain file (random access), a gzip
// file (sequential, decompressed on the fly) or memory, with the byte
// position every error message of the Kaldi readers quotes.
//
//   ASGD_ASSIGN_OR_RETURN(auto in, InputStream::OpenFile("feats.ark"));
//   ASGD_RETURN_IF_ERROR(in->Seek(1234));
//   char header[2];
//   if (in->Read(header, 2) < 2) ...  // end of data, or io_status() failed
//
// Reads never fail loudly: at the end of the data, or after a read error,
// Peek()/Get() return -1 and Read() returns fewer bytes than asked; then
// io_status() tells a read error (kUnavailable for a system error; a
// BadDataError kTruncated or kMalformedObject for a truncated or corrupt
// gzip stream) from a clean end (OK).
//
// Memory: one buffer of `buffer_bytes` (plus zlib's state for gzip). Large
// reads go straight into the destination, bypassing the buffer.
//
// Thread-safety: not thread-safe; one thread uses a stream at a time.
#ifndef ASGD_KALDI_INPUT_STREAM_H_
#define ASGD_KALDI_INPUT_STREAM_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace asgd::kaldi {

class InputStream {
 public:
  static constexpr size_t kDefaultBufferBytes = 256 * 1024;

  // A regular file, seekable, with its size known. kNotFound,
  // kPermissionDenied or kUnavailable (naming the path) when it cannot be
  // opened; kInvalidArgument (not bad data: no reason) for a directory, a
  // FIFO, a device or a socket, refused without blocking and without
  // reading it (a FIFO is never opened for reading: that would wait for a
  // writer).
  static absl::StatusOr<std::unique_ptr<InputStream>> OpenFile(
      const std::string& path, size_t buffer_bytes = kDefaultBufferBytes);

  // A file read front to back. A gzip file (recognised by its magic bytes,
  // whatever its name) is decompressed; positions then count decompressed
  // bytes, size() is -1 and Seek() fails. Other files are as OpenFile.
  static absl::StatusOr<std::unique_ptr<InputStream>> OpenSequential(
      const std::string& path, size_t buffer_bytes = kDefaultBufferBytes);

  // A copy of `data`. Seekable; `name` appears in messages.
  static std::unique_ptr<InputStream> FromMemory(std::string name,
                                                 std::string data);

  virtual ~InputStream();
  InputStream(const InputStream&) = delete;
  InputStream& operator=(const InputStream&) = delete;

  const std::string& name() const { return name_; }
  // Total bytes, or -1 when unknown (gzip).
  int64_t size() const { return size_; }
  bool seekable() const { return size_ >= 0; }
  bool gzip() const { return gzip_; }
  // Offset of the next byte to be read.
  int64_t position() const {
    return buffer_end_pos_ - static_cast<int64_t>(end_ - begin_);
  }
  // Bytes left before the end, or -1 when unknown.
  int64_t remaining() const { return size_ < 0 ? -1 : size_ - position(); }

  // Moves to `offset`, 0 <= offset <= size(). kFailedPrecondition when not
  // seekable, kOutOfRange past the end; clears a previous clean end.
  absl::Status Seek(int64_t offset);

  // The next byte (0-255) without consuming it; -1 at the end or on error.
  int Peek() {
    if (begin_ == end_ && !Fill()) return -1;
    return static_cast<unsigned char>(buffer_[begin_]);
  }
  int Get() {
    const int c = Peek();
    if (c >= 0) ++begin_;
    return c;
  }
  // Up to `n` bytes into `dst`; fewer only at the end or on error.
  size_t Read(void* dst, size_t n);

  // OK, or the first read error (see the file comment).
  const absl::Status& io_status() const { return io_status_; }

 protected:
  InputStream(std::string name, int64_t size, bool gzip, size_t buffer_bytes);
  // Reads up to `n` bytes at the current backend position into `dst`.
  // Returns the count (0 at the end), or -1 after setting io_status_.
  virtual int64_t RawRead(char* dst, size_t n) = 0;
  // Moves the backend to `offset` (seekable streams only).
  virtual absl::Status RawSeek(int64_t offset) = 0;

  absl::Status io_status_;

 private:
  bool Fill();

  std::string name_;
  int64_t size_;
  bool gzip_;
  std::vector<char> buffer_;
  size_t begin_ = 0;
  size_t end_ = 0;
  int64_t buffer_end_pos_ = 0;  // stream offset of buffer_[end_]
};

// The status of a failed open/read of `path`: kNotFound for ENOENT,
// kPermissionDenied for EACCES/EPERM, else kUnavailable; the message names
// the path, the action and strerror.
absl::Status ErrnoStatus(const std::string& path, absl::string_view action,
                         int err);

// Opens `path` read-only (the descriptor is the caller's to close) and sets
// `size`, only if it is a regular file: a FIFO, a device or a directory is
// refused (InvalidArgument naming what it is) before it is opened, since
// opening a FIFO blocks until a writer comes and a device may do anything,
// and once more on the descriptor, opened without blocking, in case the
// path changed in between. Errors of open/stat as ErrnoStatus.
absl::StatusOr<int> OpenRegular(const std::string& path, int64_t* size);

}  // namespace asgd::kaldi

#endif  // ASGD_KALDI_INPUT_STREAM_H_
