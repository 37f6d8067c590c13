// KaldiDataSource's index: feats.scp, the speakers, CMVN statistics and
// alignments, read once at Create (see data_source.h).
#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "kaldi/alignments.h"
#include "kaldi/data_source.h"
#include "kaldi/data_source_record.h"

namespace asgd::kaldi {
namespace {

bool FileExists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

// Entries of feats.scp tried, in order, to find the feature dimension.
constexpr size_t kDimProbeEntries = 16;

}  // namespace

absl::Status KaldiDataSource::Index() {
  std::vector<ScpEntry> first_entries;
  ASGD_RETURN_IF_ERROR(ReadScp(&first_entries));
  ASGD_RETURN_IF_ERROR(ReadSpeakers());
  ASGD_RETURN_IF_ERROR(ReadCmvn());
  if (!options_.features_only) ASGD_RETURN_IF_ERROR(ReadAlignments());
  if (!options_.teacher_scp.empty()) ASGD_RETURN_IF_ERROR(ReadTeacherScp());
  ASGD_RETURN_IF_ERROR(FindFeatureDim(first_entries));
  by_key_ = {};
  path_index_ = {};
  for (const Record& r : records_) {
    if (r.bad != BadDataReason::kNone) continue;
    ++live_utterances_;
    live_frames_ += r.labels.length;
  }
  return absl::OkStatus();
}

StoredRx KaldiDataSource::Intern(const Rxfilename& rx) {
  const auto [it, added] =
      path_index_.emplace(rx.path, static_cast<int32_t>(paths_.size()));
  if (added) paths_.push_back(rx.path);
  StoredRx stored;
  stored.path = it->second;
  stored.has_offset = rx.has_offset;
  stored.offset = rx.offset;
  stored.has_range = rx.has_range;
  stored.range = rx.range;
  return stored;
}

DataLocation KaldiDataSource::FeatsLocation(const Record& r) const {
  return {paths_[r.feats.path], r.feats.offset, 0, r.key};
}

absl::Status KaldiDataSource::ReadScp(std::vector<ScpEntry>* first_entries) {
  ScpOptions scp_options;
  scp_options.base_dir = options_.scp_base_dir;
  ASGD_ASSIGN_OR_RETURN(
      auto scp, ScpReader::Open(absl::StrCat(options_.data_dir, "/feats.scp"),
                                scp_options));
  ScpEntry e;
  while (true) {
    absl::StatusOr<bool> more = scp->Next(&e);
    const bool ours = e.index % options_.num_parts == options_.part;
    if (!more.ok()) {
      if (!IsBadData(more.status())) return more.status();
      if (ours) ASGD_RETURN_IF_ERROR(Reject(nullptr, more.status()));
      continue;
    }
    if (!*more) break;
    if (first_entries->size() < kDimProbeEntries) first_entries->push_back(e);
    if (!ours) continue;
    const auto [it, inserted] =
        by_key_.emplace(e.key, static_cast<int64_t>(records_.size()));
    if (!inserted) {
      ASGD_RETURN_IF_ERROR(Reject(
          nullptr,
          BadDataError(BadDataReason::kDuplicateKey,
                       {scp->path(), e.line_offset, e.line, e.key},
                       absl::StrCat("the key appears again (first on line ",
                                    records_[it->second].scp_line, ")"))));
      continue;
    }
    Record r;
    r.key = e.key;
    r.feats = Intern(e.rx);
    r.scp_line = e.line;
    records_.push_back(std::move(r));
  }
  return absl::OkStatus();
}

absl::Status KaldiDataSource::ReadSpeakers() {
  const std::string cmvn_path = absl::StrCat(options_.data_dir, "/cmvn.scp");
  const std::string utt2spk = absl::StrCat(options_.data_dir, "/utt2spk");
  if (options_.cmvn == CmvnMode::kOff) return absl::OkStatus();
  if (!FileExists(cmvn_path)) {
    if (options_.cmvn == CmvnMode::kRequire) {
      return absl::NotFoundError(
          absl::StrCat(cmvn_path, ": missing, and CMVN is required"));
    }
    return absl::OkStatus();
  }
  absl::flat_hash_map<std::string, int32_t> speaker_index;
  auto intern = [&](const std::string& name) {
    const auto [it, added] =
        speaker_index.emplace(name, static_cast<int32_t>(speakers_.size()));
    if (added) speakers_.push_back(name);
    return it->second;
  };
  if (!FileExists(utt2spk)) {
    // apply-cmvn without utt2spk: the stats are per utterance.
    for (Record& r : records_) r.speaker = intern(r.key);
    return absl::OkStatus();
  }
  ASGD_ASSIGN_OR_RETURN(auto table, TextTableReader::Open(utt2spk));
  std::string key, value;
  while (true) {
    absl::StatusOr<bool> more = table->Next(&key, &value);
    const auto it = by_key_.find(key);
    Record* record = it == by_key_.end() ? nullptr : &records_[it->second];
    if (!more.ok()) {
      if (!IsBadData(more.status())) return more.status();
      if (record != nullptr) {
        ASGD_RETURN_IF_ERROR(Reject(record, more.status()));
      }
      continue;
    }
    if (!*more) break;
    if (record == nullptr) continue;
    if (value.empty() || value.find_first_of(" \t") != std::string::npos) {
      ASGD_RETURN_IF_ERROR(Reject(
          record,
          BadDataError(BadDataReason::kMalformedLine,
                       {utt2spk, table->line_offset(), table->line(), key},
                       "want `utterance speaker`")));
      continue;
    }
    record->speaker = intern(value);
  }
  for (Record& r : records_) {
    if (r.speaker < 0 && r.bad == BadDataReason::kNone) {
      ASGD_RETURN_IF_ERROR(Reject(
          &r, BadDataError(BadDataReason::kMissingSpeaker,
                           FeatsLocation(r),
                           absl::StrCat(utt2spk, " has no speaker for it"))));
    }
  }
  return absl::OkStatus();
}

absl::Status KaldiDataSource::ReadCmvn() {
  if (speakers_.empty()) return absl::OkStatus();
  const std::string cmvn_path = absl::StrCat(options_.data_dir, "/cmvn.scp");
  absl::flat_hash_map<std::string, int32_t> speaker_index;
  for (size_t i = 0; i < speakers_.size(); ++i) {
    speaker_index.emplace(speakers_[i], static_cast<int32_t>(i));
  }
  std::vector<CmvnTransform> transforms(speakers_.size());
  std::vector<absl::Status> problem(speakers_.size());
  std::vector<bool> have(speakers_.size(), false);
  std::vector<int64_t> line(speakers_.size(), 0);  // of the speaker's entry
  ScpOptions scp_options;
  scp_options.base_dir = options_.scp_base_dir;
  ASGD_ASSIGN_OR_RETURN(auto scp, ScpReader::Open(cmvn_path, scp_options));
  ScpEntry e;
  while (true) {
    absl::StatusOr<bool> more = scp->Next(&e);
    const auto it = speaker_index.find(e.key);
    const int32_t spk = it == speaker_index.end() ? -1 : it->second;
    if (!more.ok()) {
      if (!IsBadData(more.status())) return more.status();
      if (spk >= 0 && problem[spk].ok()) problem[spk] = more.status();
      continue;
    }
    if (!*more) break;
    if (spk < 0) continue;
    line[spk] = e.line;
    if (have[spk] || !problem[spk].ok()) {
      problem[spk] = BadDataError(
          BadDataReason::kDuplicateKey, {cmvn_path, e.line_offset, e.line},
          absl::StrCat("speaker ", e.key, " appears again"));
      have[spk] = false;
      continue;
    }
    DoubleMatrix stats;
    absl::Status s = reader_.ReadMatrix(e.rx, "", &stats);
    if (!s.ok()) {
      if (!IsBadData(s)) {
        return absl::Status(
            s.code(), absl::StrCat(cmvn_path, " line ", e.line, " (speaker ",
                                   e.key, "): ", s.message()));
      }
      problem[spk] = s;
      continue;
    }
    absl::StatusOr<CmvnTransform> t =
        MakeCmvnTransform(stats, options_.norm_vars, {e.rx.path, e.rx.offset});
    if (!t.ok()) {
      problem[spk] = t.status();
      continue;
    }
    transforms[spk] = *std::move(t);
    have[spk] = true;
  }
  for (Record& r : records_) {
    if (r.bad != BadDataReason::kNone || r.speaker < 0 || have[r.speaker]) {
      continue;
    }
    const absl::Status& p = problem[r.speaker];
    const BadDataReason reason =
        p.ok() ? BadDataReason::kMissingSpeaker : BadDataReasonOf(p);
    const std::string what =
        p.ok() ? absl::StrCat(cmvn_path, " has no statistics for speaker ",
                              speakers_[r.speaker])
               : absl::StrCat("speaker ", speakers_[r.speaker], " (", cmvn_path,
                              " line ", line[r.speaker], "): ", p.message());
    ASGD_RETURN_IF_ERROR(
        Reject(&r, BadDataError(reason, FeatsLocation(r), what)));
  }
  transforms_ = std::move(transforms);
  return absl::OkStatus();
}

absl::Status KaldiDataSource::ReadAlignments() {
  ASGD_ASSIGN_OR_RETURN(alignment_files_, ExpandFileList(options_.alignments));
  ASGD_ASSIGN_OR_RETURN(
      auto reader, AlignmentReader::Open(alignment_files_, options_.limits));
  labels_ = std::make_unique<LabelStore>(options_.max_label_memory_bytes,
                                         options_.temp_dir);
  const int32_t limit = options_.num_classes > 0 ? options_.num_classes
                                                 : options_.max_num_classes;
  int64_t max_label = -1;
  absl::Status first_file_error;
  AlignmentEntry e;
  while (true) {
    absl::StatusOr<bool> more = reader->Next(&e);
    if (!more.ok()) {
      if (!IsBadData(more.status())) return more.status();
      if (first_file_error.ok()) first_file_error = more.status();
      const auto it = e.key.empty() ? by_key_.end() : by_key_.find(e.key);
      if (it != by_key_.end()) {
        ASGD_RETURN_IF_ERROR(Reject(&records_[it->second], more.status()));
      }
      continue;
    }
    if (!*more) break;
    alignment_frames_ += static_cast<int64_t>(e.labels.size());
    for (int32_t l : e.labels) {
      if (l >= 0 && l < options_.max_num_classes && l > max_label) {
        max_label = l;
      }
    }
    const auto it = by_key_.find(e.key);
    if (it == by_key_.end()) continue;
    Record& r = records_[it->second];
    if (r.ali_file >= 0) {
      ASGD_RETURN_IF_ERROR(Reject(
          &r, BadDataError(BadDataReason::kDuplicateKey, e.where,
                           absl::StrCat("a second alignment (the first is in ",
                                        alignment_files_[r.ali_file],
                                        " at byte ", r.ali_offset, ")"))));
      continue;
    }
    r.ali_file = e.file_index;
    r.ali_offset = e.where.offset;
    if (r.bad != BadDataReason::kNone) continue;
    const auto bad_label =
        std::find_if(e.labels.begin(), e.labels.end(),
                     [limit](int32_t l) { return l < 0 || l >= limit; });
    if (bad_label != e.labels.end()) {
      ASGD_RETURN_IF_ERROR(Reject(
          &r, BadDataError(BadDataReason::kLabelOutOfRange, e.where,
                           absl::StrCat("label ", *bad_label, " at frame ",
                                        bad_label - e.labels.begin(),
                                        " is outside [0, ", limit, ")",
                                        options_.num_classes > 0
                                            ? " (the class count)"
                                            : " (max_num_classes)"))));
      continue;
    }
    ASGD_ASSIGN_OR_RETURN(r.labels, labels_->Append(e.labels));
  }
  num_classes_ = options_.num_classes > 0 ? options_.num_classes
                                          : static_cast<int32_t>(max_label + 1);
  if (num_classes_ <= 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "no labels in the alignments (", absl::StrJoin(alignment_files_, ", "),
        "): cannot tell the class count"));
  }
  for (Record& r : records_) {
    if (r.bad != BadDataReason::kNone || r.ali_file >= 0) continue;
    std::string what = absl::StrCat(
        "feats.scp line ", r.scp_line, ": no alignment in ",
        alignment_files_.size(), " file(s) (", alignment_files_.front(),
        alignment_files_.size() > 1 ? ", ..." : "", ")");
    if (!first_file_error.ok()) {
      absl::StrAppend(&what, "; note: ", first_file_error.message());
    }
    ASGD_RETURN_IF_ERROR(
        Reject(&r, BadDataError(BadDataReason::kMissingAlignment,
                                FeatsLocation(r), what)));
  }
  return absl::OkStatus();
}

absl::Status KaldiDataSource::FindFeatureDim(
    const std::vector<ScpEntry>& first_entries) {
  // The dimensions of the first readable utterances, in the order first seen.
  std::vector<std::pair<int32_t, int>> dims;
  int readable = 0;
  absl::Status last = absl::InvalidArgumentError(
      absl::StrCat(options_.data_dir,
                   "/feats.scp has no usable entry: "
                   "cannot tell the feature dimension"));
  const std::string scp = absl::StrCat(options_.data_dir, "/feats.scp");
  Matrix m;
  for (const ScpEntry& e : first_entries) {
    absl::Status s = reader_.ReadMatrix(e.rx, e.key, &m);
    if (!s.ok() && !IsBadData(s)) return AtScpEntry(s, scp, e.line, e.key);
    if (!s.ok()) {
      last = s;
      continue;
    }
    if (m.cols <= 0) continue;
    ++readable;
    auto it = std::find_if(dims.begin(), dims.end(),
                           [&](const auto& d) { return d.first == m.cols; });
    if (it == dims.end()) {
      dims.emplace_back(m.cols, 1);
    } else {
      ++it->second;
    }
  }
  auto describe = [&] {
    std::vector<std::string> parts;
    for (const auto& [dim, n] : dims) {
      parts.push_back(absl::StrCat(n, " of dimension ", dim));
    }
    return absl::StrCat(
        "the first ", readable,
        " readable utterances of feats.scp: ", absl::StrJoin(parts, ", "));
  };
  if (options_.feature_dim > 0) {
    feature_dim_ = options_.feature_dim;
    dim_origin_ = "as given";
    const bool any = std::any_of(dims.begin(), dims.end(), [&](const auto& d) {
      return d.first == feature_dim_;
    });
    if (readable > 0 && !any) {
      // Not one bad utterance: data of another kind than expected.
      return absl::FailedPreconditionError(
          absl::StrCat(options_.data_dir, ": ", describe(), "; none has the ",
                       feature_dim_, " features per frame expected"));
    }
    return absl::OkStatus();
  }
  if (dims.empty()) return last;
  // The most common one (the first seen of those tied): one utterance of
  // another dimension, first or not, is then that utterance's problem.
  auto best = dims.begin();
  for (auto it = dims.begin(); it != dims.end(); ++it) {
    if (it->second > best->second) best = it;
  }
  feature_dim_ = best->first;
  dim_origin_ = dims.size() == 1
                    ? absl::StrCat("that of ", describe())
                    : absl::StrCat("the most common among ", describe());
  return absl::OkStatus();
}

}  // namespace asgd::kaldi
