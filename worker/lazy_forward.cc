#include "worker/lazy_forward.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "kaldi/alignments.h"

namespace asgd {
namespace {

// `s` refused, or reported and passed over (OkStatus) under kSkip. Only
// bad data (InvalidArgument) is ever skipped.
absl::Status RefuseOrSkip(absl::Status s, kaldi::BadDataPolicy policy,
                          BadDataReporter* bad) {
  if (policy == kaldi::BadDataPolicy::kSkip &&
      s.code() == absl::StatusCode::kInvalidArgument) {
    bad->Report(s);
    return absl::OkStatus();
  }
  return s;
}

}  // namespace

absl::StatusOr<absl::flat_hash_map<std::string, ActiveOutputs>>
ReadActiveLists(const std::vector<std::string>& files,
                kaldi::BadDataPolicy policy, BadDataReporter* bad) {
  ASGD_ASSIGN_OR_RETURN(auto reader, kaldi::PosteriorReader::Open(files));
  absl::flat_hash_map<std::string, ActiveOutputs> lists;
  int64_t entries = 0;
  kaldi::PosteriorEntry e;
  std::vector<int32_t> pdfs;
  while (true) {
    absl::StatusOr<bool> more = reader->Next(&e);
    if (!more.ok()) {
      if (!kaldi::IsBadData(more.status())) return more.status();
      // The error names the archive, the byte offset and the key.
      ASGD_RETURN_IF_ERROR(RefuseOrSkip(more.status(), policy, bad));
      continue;
    }
    if (!*more) break;
    if (lists.contains(e.key)) {
      ASGD_RETURN_IF_ERROR(RefuseOrSkip(
          absl::InvalidArgumentError(absl::StrCat(
              "--active_pdfs: utterance ", e.key, " appears twice (again in ",
              e.where.file, " at byte ", e.where.offset, ")")),
          policy, bad));
      continue;
    }
    ActiveOutputs& active = lists[e.key];
    for (const auto& frame : e.post) {
      entries += static_cast<int64_t>(frame.size());
      if (entries > kMaxActiveEntries) {
        return absl::ResourceExhaustedError(absl::StrCat(
            "--active_pdfs: more than ", kMaxActiveEntries,
            " active pdfs in all (at utterance ", e.key, ")"));
      }
      pdfs.clear();
      for (const auto& pair : frame) pdfs.push_back(pair.first);
      active.AddFrame(pdfs);
    }
  }
  return lists;
}

absl::StatusOr<LazyForwardResult> RunLazyForward(
    const ModelSpec& spec, absl::Span<const float> params,
    absl::Span<const float> log_priors,
    const absl::flat_hash_map<std::string, ActiveOutputs>& lists,
    const LazyScorerOptions& options, kaldi::BadDataPolicy policy,
    kaldi::KaldiDataSource* source, kaldi::ArchiveWriter* writer,
    BadDataReporter* bad) {
  if (!log_priors.empty() &&
      static_cast<int>(log_priors.size()) != spec.num_classes) {
    return absl::InvalidArgumentError(absl::StrCat(
        log_priors.size(), " log-priors for ", spec.num_classes, " classes"));
  }
  ASGD_ASSIGN_OR_RETURN(auto scorer, LazyScorer::Create(spec, params, options));
  LazyForwardResult result;
  kaldi::KaldiUtterance utt;
  std::vector<float> scores;
  kaldi::Posterior post;
  int64_t lists_used = 0;
  while (true) {
    ASGD_ASSIGN_OR_RETURN(bool more, source->Next(&utt));
    if (!more) break;
    const auto it = lists.find(utt.key);
    absl::Status s;
    if (it == lists.end()) {
      s = absl::InvalidArgumentError("no active pdf list in --active_pdfs");
    } else {
      ++lists_used;
      s = scorer->Logits(utt.features.data, utt.num_frames(), it->second,
                         &scores);
    }
    if (!s.ok()) {
      ASGD_RETURN_IF_ERROR(RefuseOrSkip(
          absl::Status(s.code(),
                       absl::StrCat("utterance ", utt.key, ": ", s.message())),
          policy, bad));
      continue;
    }
    const ActiveOutputs& active = it->second;
    post.assign(active.frames(), {});
    for (int64_t f = 0; f < active.frames(); ++f) {
      for (int64_t k = active.begin[f]; k < active.begin[f + 1]; ++k) {
        const int32_t pdf = active.pdfs[k];
        post[f].emplace_back(
            pdf, log_priors.empty() ? scores[k] : scores[k] - log_priors[pdf]);
      }
    }
    ASGD_RETURN_IF_ERROR(writer->WritePosterior(utt.key, post));
    ++result.utterances;
  }
  result.lists_unused = static_cast<int64_t>(lists.size()) - lists_used;
  result.stats = scorer->stats();
  return result;
}

std::string DescribeLazyForward(const LazyForwardResult& result, int classes,
                                int batch_rows) {
  const LazyScorerStats& s = result.stats;
  if (s.frames == 0) return "no frames scored";
  const double frames = static_cast<double>(s.frames);
  const double per_frame = static_cast<double>(s.active) / frames;
  std::string line = absl::StrFormat(
      "%lld frames, %.1f of the %d pdfs active per frame (%.1f%%); hidden "
      "layers %.2f us/frame; output layer lazily %.3f us/frame",
      static_cast<long long>(s.frames), per_frame, classes,
      100.0 * per_frame / classes, 1e6 * s.hidden_seconds / frames,
      1e6 * s.lazy_seconds / frames);
  if (s.full_one_seconds > 0) {
    absl::StrAppendFormat(
        &line,
        ", in full %.3f us/frame a frame at a time (lazy %.2fx faster) and "
        "%.3f us/frame in batches of %d (lazy %.2fx faster); largest |lazy - "
        "full| %.3g",
        1e6 * s.full_one_seconds / frames,
        s.full_one_seconds / std::max(s.lazy_seconds, 1e-12),
        1e6 * s.full_batch_seconds / frames, batch_rows,
        s.full_batch_seconds / std::max(s.lazy_seconds, 1e-12),
        s.max_abs_difference);
  }
  if (result.lists_unused > 0) {
    absl::StrAppendFormat(&line, "; %lld lists of utterances not in the data",
                          static_cast<long long>(result.lists_unused));
  }
  return line;
}

}  // namespace asgd
