#include "kaldi/data_source.h"

#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "kaldi/alignments.h"

namespace asgd::kaldi {
namespace {

bool FileExists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

// Entries of feats.scp tried, in order, to find the feature dimension.
constexpr size_t kDimProbeEntries = 16;

// An error that is not bad data (a file that cannot be opened or read, a
// FIFO or a device where an archive belongs) about the feats.scp entry on
// `line`: its code, with the entry named.
absl::Status AtScpEntry(const absl::Status& s, const std::string& scp,
                        int64_t line, const std::string& key) {
  return absl::Status(s.code(),
                      absl::StrCat(scp, " line ", line, " (utterance ", key,
                                   "): ", s.message()));
}

}  // namespace

struct KaldiDataSource::Record {
  std::string key;
  int32_t path = 0;  // index into paths_
  bool has_offset = false;
  bool has_range = false;
  int64_t offset = 0;
  MatrixRange range;
  int64_t scp_line = 0;
  int32_t speaker = -1;   // index into speakers_
  int32_t ali_file = -1;  // index into alignment_files_
  int64_t ali_offset = -1;
  LabelStore::Handle labels;
  BadDataReason bad = BadDataReason::kNone;

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

KaldiDataSource::KaldiDataSource(const KaldiDataOptions& options)
    : options_(options), reader_(options.max_open_files, options.limits) {}

KaldiDataSource::~KaldiDataSource() = default;

absl::StatusOr<std::unique_ptr<KaldiDataSource>> KaldiDataSource::Create(
    const KaldiDataOptions& options) {
  if (options.data_dir.empty()) {
    return absl::InvalidArgumentError("KaldiDataSource: no data_dir");
  }
  if (options.alignments.empty() != options.features_only) {
    return absl::InvalidArgumentError(
        options.features_only
            ? "KaldiDataSource: features_only takes no alignments"
            : "KaldiDataSource: no alignments");
  }
  if (options.num_parts < 1 || options.part < 0 ||
      options.part >= options.num_parts) {
    return absl::InvalidArgumentError(
        absl::StrCat("KaldiDataSource: part ", options.part, " of ",
                     options.num_parts, " (want 0 <= part < num_parts)"));
  }
  if (options.num_classes < 0 || options.max_num_classes < 1 ||
      options.num_classes > options.max_num_classes ||
      options.feature_dim < 0 || options.read_block < 1 ||
      options.shuffle_buffer_utterances < 1 ||
      options.shuffle_buffer_bytes < 0 || options.max_open_files < 1 ||
      !(options.max_feature_magnitude > 0)) {
    return absl::InvalidArgumentError(
        "KaldiDataSource: num_classes, feature_dim >= 0 (num_classes <= "
        "max_num_classes), read_block, shuffle_buffer_utterances, "
        "max_open_files >= 1, shuffle_buffer_bytes >= 0, "
        "max_feature_magnitude > 0");
  }
  auto source = std::unique_ptr<KaldiDataSource>(new KaldiDataSource(options));
  if (!options.global_cmvn.data.empty()) {
    ASGD_ASSIGN_OR_RETURN(
        source->global_,
        MakeCmvnTransform(options.global_cmvn, /*norm_vars=*/true,
                          {"global CMVN statistics"}));
  }
  ASGD_RETURN_IF_ERROR(source->Index());
  source->StartEpoch(0);
  return source;
}

absl::Status KaldiDataSource::Reject(Record* record,
                                     const absl::Status& status) {
  if (options_.policy == BadDataPolicy::kRefuse) return status;
  if (record != nullptr) {
    if (record->bad != BadDataReason::kNone) return absl::OkStatus();
    record->bad = BadDataReasonOf(status);
  }
  bad_.Add(BadDataReasonOf(status));
  if (options_.on_skip) options_.on_skip(status);
  return absl::OkStatus();
}

absl::Status KaldiDataSource::Index() {
  std::vector<ScpEntry> first_entries;
  ASGD_RETURN_IF_ERROR(ReadScp(&first_entries));
  ASGD_RETURN_IF_ERROR(ReadSpeakers());
  ASGD_RETURN_IF_ERROR(ReadCmvn());
  if (!options_.features_only) ASGD_RETURN_IF_ERROR(ReadAlignments());
  ASGD_RETURN_IF_ERROR(FindFeatureDim(first_entries));
  by_key_ = {};
  for (const Record& r : records_) {
    if (r.bad != BadDataReason::kNone) continue;
    ++live_utterances_;
    live_frames_ += r.labels.length;
  }
  return absl::OkStatus();
}

absl::Status KaldiDataSource::ReadScp(std::vector<ScpEntry>* first_entries) {
  ScpOptions scp_options;
  scp_options.base_dir = options_.scp_base_dir;
  ASGD_ASSIGN_OR_RETURN(
      auto scp, ScpReader::Open(absl::StrCat(options_.data_dir, "/feats.scp"),
                                scp_options));
  absl::flat_hash_map<std::string, int32_t> path_index;
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
    const auto [p, added] =
        path_index.emplace(e.rx.path, static_cast<int32_t>(paths_.size()));
    if (added) paths_.push_back(e.rx.path);
    r.path = p->second;
    r.has_offset = e.rx.has_offset;
    r.offset = e.rx.offset;
    r.has_range = e.rx.has_range;
    r.range = e.rx.range;
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
                           {paths_[r.path], r.offset, 0, r.key},
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
    ASGD_RETURN_IF_ERROR(Reject(
        &r, BadDataError(reason, {paths_[r.path], r.offset, 0, r.key}, what)));
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
                                {paths_[r.path], r.offset, 0, r.key}, what)));
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

void KaldiDataSource::StartEpoch(uint64_t epoch) {
  std::seed_seq seq{
      static_cast<uint32_t>(options_.seed),
      static_cast<uint32_t>(options_.seed >> 32), static_cast<uint32_t>(epoch),
      static_cast<uint32_t>(epoch >> 32), static_cast<uint32_t>(options_.part)};
  rng_.seed(seq);
  order_.clear();
  order_.reserve(records_.size());
  const int64_t n = static_cast<int64_t>(records_.size());
  if (!options_.shuffle) {
    for (int64_t i = 0; i < n; ++i) order_.push_back(i);
  } else {
    const int64_t block = options_.read_block;
    std::vector<int64_t> blocks((n + block - 1) / block);
    for (size_t b = 0; b < blocks.size(); ++b) blocks[b] = b;
    std::shuffle(blocks.begin(), blocks.end(), rng_);
    for (int64_t b : blocks) {
      for (int64_t i = b * block; i < std::min(n, (b + 1) * block); ++i) {
        order_.push_back(i);
      }
    }
  }
  cursor_ = 0;
  buffer_.clear();
  buffer_bytes_ = 0;
  has_pending_ = false;
  pass_error_ = absl::OkStatus();
}

absl::Status KaldiDataSource::Load(const Record& r, KaldiUtterance* out) {
  const Rxfilename rx = r.Rx(paths_);
  absl::Status s = reader_.ReadMatrix(rx, r.key, &out->features);
  if (!s.ok()) return s;
  const DataLocation where{rx.path, rx.offset, 0, r.key};
  Matrix& f = out->features;
  if (f.rows == 0) f.cols = feature_dim_;
  if (f.cols != feature_dim_) {
    return BadDataError(
        BadDataReason::kDimMismatch, where,
        absl::StrCat("features of dimension ", f.cols, ", the data set's is ",
                     feature_dim_, " (", dim_origin_, ")"));
  }
  const float bound = options_.max_feature_magnitude;
  float max_read = 0;
  s = CheckFeatureValues(f.data, f.cols, bound, where, "as read", &max_read);
  if (!s.ok()) return s;
  if (labels_ == nullptr) {
    out->labels.clear();  // features_only
  } else {
    s = labels_->Read(r.labels, &out->labels);
    if (!s.ok()) return s;
  }
  if (labels_ != nullptr &&
      static_cast<int64_t>(out->labels.size()) != f.rows) {
    return BadDataError(
        BadDataReason::kLengthMismatch, where,
        absl::StrCat(f.rows, " feature frames but ", out->labels.size(),
                     " labels in the alignment (", alignment_files_[r.ali_file],
                     " at byte ", r.ali_offset, ")"));
  }
  float max_out = max_read;
  if (!transforms_.empty()) {
    const CmvnTransform& t = transforms_[r.speaker];
    if (t.dim() != f.cols) {
      return BadDataError(
          BadDataReason::kBadCmvn, where,
          absl::StrCat("the CMVN statistics of speaker ", speakers_[r.speaker],
                       " are of dimension ", t.dim(), ", the features' ",
                       f.cols));
    }
    ApplyCmvn(t, &f);
    // A speaker's statistics can blow features up (a variance near 0).
    s = CheckFeatureValues(
        f.data, f.cols, bound, where,
        absl::StrCat("after the CMVN of speaker ", speakers_[r.speaker]),
        &max_out);
    if (!s.ok()) return s;
  }
  if (global_.dim() > 0) {
    if (global_.dim() != f.cols) {
      return absl::FailedPreconditionError(absl::StrCat(
          "the global CMVN statistics are of dimension ", global_.dim(),
          ", the features of ", r.key, " of ", f.cols));
    }
    ApplyCmvn(global_, &f);
    s = CheckFeatureValues(f.data, f.cols, bound, where,
                           "after the global CMVN", &max_out);
    if (!s.ok()) return s;
  }
  stats_.max_abs_feature_read = std::max(stats_.max_abs_feature_read, max_read);
  stats_.max_abs_feature = std::max(stats_.max_abs_feature, max_out);
  out->key = r.key;
  return absl::OkStatus();
}

absl::StatusOr<bool> KaldiDataSource::Next(KaldiUtterance* out) {
  if (!pass_error_.ok()) return pass_error_;
  const size_t max_utterances =
      options_.shuffle ? options_.shuffle_buffer_utterances : 1;
  while (true) {
    if (!has_pending_) {
      // Full by count: hand one out before reading ahead.
      if (buffer_.size() >= max_utterances) break;
      if (cursor_ >= order_.size()) break;
      Record& r = records_[order_[cursor_++]];
      if (r.bad != BadDataReason::kNone) continue;
      absl::Status s = Load(r, &pending_);
      if (!s.ok()) {
        if (IsBadData(s) && options_.policy == BadDataPolicy::kSkip) {
          ASGD_RETURN_IF_ERROR(Reject(&r, s));
          --live_utterances_;
          live_frames_ -= r.labels.length;
          continue;
        }
        if (!IsBadData(s)) {
          s = AtScpEntry(s, absl::StrCat(options_.data_dir, "/feats.scp"),
                         r.scp_line, r.key);
        }
        pass_error_ = s;
        return s;
      }
      has_pending_ = true;
    }
    const int64_t bytes = pending_.bytes();
    const bool fits = buffer_.empty() ||
                      (buffer_.size() < max_utterances &&
                       buffer_bytes_ + bytes <= options_.shuffle_buffer_bytes);
    if (!fits) break;
    buffer_.push_back(std::move(pending_));
    has_pending_ = false;
    buffer_bytes_ += bytes;
    stats_.peak_buffer_utterances = std::max<int64_t>(
        stats_.peak_buffer_utterances, static_cast<int64_t>(buffer_.size()));
    stats_.peak_buffer_bytes =
        std::max(stats_.peak_buffer_bytes, buffer_bytes_);
  }
  if (buffer_.empty()) return false;
  size_t pick = 0;
  if (buffer_.size() > 1) {
    pick = std::uniform_int_distribution<size_t>(0, buffer_.size() - 1)(rng_);
  }
  std::swap(buffer_[pick], buffer_.back());
  *out = std::move(buffer_.back());
  buffer_.pop_back();
  buffer_bytes_ -= out->bytes();
  ++stats_.utterances_read;
  stats_.frames_read += out->num_frames();
  return true;
}

KaldiDataStats KaldiDataSource::stats() const {
  KaldiDataStats s = stats_;
  s.buffer_utterances = static_cast<int64_t>(buffer_.size());
  s.buffer_bytes = buffer_bytes_;
  s.open_files = reader_.open_files();
  s.file_opens = reader_.total_opens();
  s.label_memory_bytes = labels_ == nullptr ? 0 : labels_->memory_bytes();
  s.labels_spilled = labels_ != nullptr && labels_->spilled();
  return s;
}

}  // namespace asgd::kaldi
