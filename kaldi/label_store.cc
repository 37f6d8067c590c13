#include "kaldi/label_store.h"

#include <errno.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "kaldi/input_stream.h"

namespace asgd::kaldi {
namespace {

// Labels buffered before a write to the spill file.
constexpr size_t kWriteBufferLabels = 256 * 1024;

absl::Status WriteAll(int fd, const char* data, size_t n, int64_t offset,
                      const std::string& name) {
  while (n > 0) {
    const ssize_t w = ::pwrite(fd, data, n, offset);
    if (w < 0) {
      if (errno == EINTR) continue;
      return ErrnoStatus(name, "write", errno);
    }
    data += w;
    n -= static_cast<size_t>(w);
    offset += w;
  }
  return absl::OkStatus();
}

}  // namespace

LabelStore::LabelStore(int64_t max_memory_bytes, std::string temp_dir)
    : max_memory_bytes_(max_memory_bytes), temp_dir_(std::move(temp_dir)) {
  if (temp_dir_.empty()) temp_dir_ = "/tmp";
}

LabelStore::~LabelStore() {
  if (fd_ >= 0) ::close(fd_);
}

int64_t LabelStore::memory_bytes() const {
  return static_cast<int64_t>((memory_.capacity() + pending_.capacity()) *
                              sizeof(int32_t));
}

absl::Status LabelStore::Spill() {
  std::string path = absl::StrCat(temp_dir_, "/asgd-labels.XXXXXX");
  const int fd = ::mkstemp(path.data());
  if (fd < 0) return ErrnoStatus(path, "create", errno);
  ::unlink(path.c_str());  // gone when closed
  fd_ = fd;
  absl::Status s =
      WriteAll(fd_, reinterpret_cast<const char*>(memory_.data()),
               memory_.size() * sizeof(int32_t), 0, "label spill file");
  if (!s.ok()) return s;
  flushed_ = static_cast<int64_t>(memory_.size());
  std::vector<int32_t>().swap(memory_);
  pending_.reserve(kWriteBufferLabels);
  return absl::OkStatus();
}

absl::Status LabelStore::Flush() {
  if (pending_.empty()) return absl::OkStatus();
  absl::Status s = WriteAll(fd_, reinterpret_cast<const char*>(pending_.data()),
                            pending_.size() * sizeof(int32_t), flushed_ * 4,
                            "label spill file");
  if (!s.ok()) return s;
  flushed_ += static_cast<int64_t>(pending_.size());
  pending_.clear();
  return absl::OkStatus();
}

absl::StatusOr<LabelStore::Handle> LabelStore::Append(
    absl::Span<const int32_t> labels) {
  Handle h{size_, static_cast<int32_t>(labels.size())};
  if (fd_ < 0 && static_cast<int64_t>((memory_.size() + labels.size()) * 4) >
                     max_memory_bytes_) {
    absl::Status s = Spill();
    if (!s.ok()) return s;
  }
  if (fd_ < 0) {
    memory_.insert(memory_.end(), labels.begin(), labels.end());
  } else {
    pending_.insert(pending_.end(), labels.begin(), labels.end());
    if (pending_.size() >= kWriteBufferLabels) {
      absl::Status s = Flush();
      if (!s.ok()) return s;
    }
  }
  size_ += static_cast<int64_t>(labels.size());
  return h;
}

absl::Status LabelStore::Read(Handle h, std::vector<int32_t>* out) {
  out->resize(h.length);
  if (h.length == 0) return absl::OkStatus();
  if (fd_ < 0) {
    std::copy(memory_.begin() + h.offset, memory_.begin() + h.offset + h.length,
              out->begin());
    return absl::OkStatus();
  }
  if (h.offset + h.length > flushed_) {
    absl::Status s = Flush();
    if (!s.ok()) return s;
  }
  char* dst = reinterpret_cast<char*>(out->data());
  size_t n = static_cast<size_t>(h.length) * 4;
  int64_t offset = h.offset * 4;
  while (n > 0) {
    const ssize_t r = ::pread(fd_, dst, n, offset);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) {
      return r < 0 ? ErrnoStatus("label spill file", "read", errno)
                   : absl::DataLossError("label spill file is short");
    }
    dst += r;
    n -= static_cast<size_t>(r);
    offset += r;
  }
  return absl::OkStatus();
}

}  // namespace asgd::kaldi
