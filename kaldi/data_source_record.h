// Internal to the KaldiDataSource sources (data_source.cc reads utterances,
// data_source_index.cc builds the index they are read from): one indexed
// utterance, and the error helper both use. Not part of the library's
// interface.
#ifndef ASGD_KALDI_DATA_SOURCE_RECORD_H_
#define ASGD_KALDI_DATA_SOURCE_RECORD_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "kaldi/bad_data.h"
#include "kaldi/data_source.h"
#include "kaldi/label_store.h"
#include "kaldi/scp.h"

namespace asgd::kaldi {

// An rxfilename as a record keeps it: its path interned in the source's
// path table (KaldiDataSource::Intern).
struct StoredRx {
  int32_t path = -1;  // index into paths_; -1: none
  bool has_offset = false;
  bool has_range = false;
  int64_t offset = 0;
  MatrixRange range;

  Rxfilename Rx(const std::vector<std::string>& paths) const {
    Rxfilename rx;
    rx.path = paths[path];
    rx.has_offset = has_offset;
    rx.offset = offset;
    rx.has_range = has_range;
    rx.range = range;
    return rx;
  }
};

struct KaldiDataSource::Record {
  std::string key;
  StoredRx feats;  // the features, from feats.scp
  int64_t scp_line = 0;
  int32_t speaker = -1;   // index into speakers_
  int32_t ali_file = -1;  // index into alignment_files_
  int64_t ali_offset = -1;
  LabelStore::Handle labels;
  StoredRx teacher;  // with a teacher scp; path -1: none read
  BadDataReason bad = BadDataReason::kNone;
};

// An error that is not bad data (a file that cannot be opened or read, a
// FIFO or a device where an archive belongs) about the feats.scp entry on
// `line`: its code, with the entry named.
inline absl::Status AtScpEntry(const absl::Status& s, const std::string& scp,
                        int64_t line, const std::string& key) {
  return absl::Status(s.code(),
                      absl::StrCat(scp, " line ", line, " (utterance ", key,
                                   "): ", s.message()));
}

}  // namespace asgd::kaldi

#endif  // ASGD_KALDI_DATA_SOURCE_RECORD_H_
