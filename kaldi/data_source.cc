#include "kaldi/data_source.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "kaldi/alignments.h"
#include "kaldi/data_source_record.h"

namespace asgd::kaldi {

KaldiDataSource::KaldiDataSource(const KaldiDataOptions& options)
    : options_(options), reader_(options.max_open_files, options.limits) {}

KaldiDataSource::~KaldiDataSource() = default;

absl::StatusOr<std::unique_ptr<KaldiDataSource>> KaldiDataSource::Create(
    const KaldiDataOptions& options) {
  if (options.data_dir.empty()) {
    return absl::InvalidArgumentError("KaldiDataSource: no data_dir");
  }
  if (options.features_only && !options.teacher_scp.empty()) {
    return absl::InvalidArgumentError(
        "KaldiDataSource: a teacher_scp trains: not with features_only");
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
  const Rxfilename rx = r.feats.Rx(paths_);
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
  if (options_.teacher_scp.empty()) {
    out->teacher = {};
  } else {
    s = LoadTeacher(r, out);
    if (!s.ok()) return s;
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
