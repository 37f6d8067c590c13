// LabelStore: the frame labels of many utterances, appended once and read
// back by handle, in memory up to a budget and beyond it in an unlinked
// temporary file (so a corpus whose labels exceed memory still works; the
// page cache keeps the file's hot parts in RAM without counting against the
// process).
//
//   LabelStore store(/*max_memory_bytes=*/256 << 20, "/tmp");
//   ASGD_ASSIGN_OR_RETURN(LabelStore::Handle h, store.Append(labels));
//   ...
//   ASGD_RETURN_IF_ERROR(store.Read(h, &labels));
//
// Thread-safety: not thread-safe (Read may flush the write buffer).
#ifndef ASGD_KALDI_LABEL_STORE_H_
#define ASGD_KALDI_LABEL_STORE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace asgd::kaldi {

class LabelStore {
 public:
  struct Handle {
    int64_t offset = 0;  // in labels
    int32_t length = 0;
  };

  // Labels are kept in memory while they take at most `max_memory_bytes`;
  // then all of them move to a temporary file created in `temp_dir`.
  LabelStore(int64_t max_memory_bytes, std::string temp_dir);
  ~LabelStore();
  LabelStore(const LabelStore&) = delete;
  LabelStore& operator=(const LabelStore&) = delete;

  // The I/O status when the temporary file cannot be created or written.
  absl::StatusOr<Handle> Append(absl::Span<const int32_t> labels);
  absl::Status Read(Handle handle, std::vector<int32_t>* out);

  int64_t num_labels() const { return size_; }
  bool spilled() const { return fd_ >= 0; }
  // Bytes of labels held in memory (including the file's write buffer).
  int64_t memory_bytes() const;

 private:
  absl::Status Spill();
  absl::Status Flush();

  int64_t max_memory_bytes_;
  std::string temp_dir_;
  std::vector<int32_t> memory_;   // all labels while not spilled
  std::vector<int32_t> pending_;  // spilled: labels not yet written
  int64_t size_ = 0;              // labels appended
  int64_t flushed_ = 0;           // spilled: labels in the file
  int fd_ = -1;
};

}  // namespace asgd::kaldi

#endif  // ASGD_KALDI_LABEL_STORE_H_
