#include "kaldi/corpus_export.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <algorithm>
#include <map>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/status_macros.h"
#include "corpus/corpus_io.h"
#include "kaldi/archive_reader.h"
#include "kaldi/cmvn.h"
#include "kaldi/input_stream.h"
#include "kaldi/scp.h"

namespace asgd::kaldi {
namespace {

struct Entry {
  std::string key;
  std::string speaker;
  std::string text;
  const corpus::Utterance* utt = nullptr;
};

absl::Status MakeDir(const std::string& path) {
  if (::mkdir(path.c_str(), 0755) != 0 && errno != EEXIST) {
    return ErrnoStatus(path, "create directory", errno);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> AbsolutePath(const std::string& path) {
  char buffer[PATH_MAX];
  if (::realpath(path.c_str(), buffer) == nullptr) {
    return ErrnoStatus(path, "resolve", errno);
  }
  return std::string(buffer);
}

// The part files of `split` ("train" or "heldout") listed in corpus.txt.
absl::StatusOr<std::vector<std::string>> PartFiles(const std::string& dir,
                                                   absl::string_view split) {
  ASGD_ASSIGN_OR_RETURN(
      auto table,
      TextTableReader::Open(absl::StrCat(dir, "/corpus.txt"), 1 << 24));
  const std::string wanted = absl::StrCat(split, "_files");
  std::string key, value;
  while (true) {
    absl::StatusOr<bool> more = table->Next(&key, &value);
    if (!more.ok()) return more.status();
    if (!*more) break;
    if (key == wanted) {
      return std::vector<std::string>(
          absl::StrSplit(value, absl::ByAnyChar(" \t"), absl::SkipEmpty()));
    }
  }
  return absl::InvalidArgumentError(
      absl::StrCat(dir, "/corpus.txt: no \"", wanted, "\" line"));
}

// Ids, speakers and transcripts of a split from its parts' .txt files
// (`<id> <voice> <text>` per utterance, in the .bin files' order). Without
// them: `<split>-NNNNNN`, speaker `voice<index>`, no text.
absl::StatusOr<std::vector<Entry>> SplitEntries(
    const std::string& dir, absl::string_view split,
    const std::vector<corpus::Utterance>& utts) {
  ASGD_ASSIGN_OR_RETURN(std::vector<std::string> parts, PartFiles(dir, split));
  std::vector<Entry> entries;
  bool have_text = true;
  for (const std::string& part : parts) {
    std::string txt = part;
    if (absl::EndsWith(txt, ".bin")) txt.resize(txt.size() - 4);
    txt = absl::StrCat(dir, "/", txt, ".txt");
    auto table = TextTableReader::Open(txt, 1 << 20);
    if (!table.ok() && table.status().code() == absl::StatusCode::kNotFound) {
      have_text = false;
      break;
    }
    if (!table.ok()) return table.status();
    std::string id, rest;
    while (true) {
      absl::StatusOr<bool> more = (*table)->Next(&id, &rest);
      if (!more.ok()) return more.status();
      if (!*more) break;
      const std::vector<std::string> fields =
          absl::StrSplit(rest, absl::MaxSplits(absl::ByAnyChar(" \t"), 1));
      if (fields.empty() || fields[0].empty()) {
        return absl::InvalidArgumentError(absl::StrCat(
            txt, " line ", (*table)->line(), ": want `<id> <voice> <text>`"));
      }
      Entry e;
      e.speaker = fields[0];
      e.key = absl::StrCat(e.speaker, "-", id);
      if (fields.size() > 1) {
        e.text = std::string(absl::StripAsciiWhitespace(fields[1]));
      }
      entries.push_back(std::move(e));
    }
  }
  if (!have_text) {
    entries.clear();
    for (size_t i = 0; i < utts.size(); ++i) {
      Entry e;
      e.speaker = absl::StrCat("voice", utts[i].voice);
      e.key = absl::StrFormat("%s-%s-%06d", e.speaker, split, i);
      entries.push_back(std::move(e));
    }
  }
  if (entries.size() != utts.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat(dir, ": the ", split, " .txt files list ", entries.size(),
                     " utterances, the .bin files hold ", utts.size()));
  }
  for (size_t i = 0; i < utts.size(); ++i) entries[i].utt = &utts[i];
  std::sort(entries.begin(), entries.end(),
            [](const Entry& a, const Entry& b) { return a.key < b.key; });
  for (size_t i = 1; i < entries.size(); ++i) {
    if (entries[i].key == entries[i - 1].key) {
      return absl::InvalidArgumentError(
          absl::StrCat(dir, ": utterance id ", entries[i].key, " twice"));
    }
  }
  return entries;
}

absl::StatusOr<CorpusExportSplit> ExportSplit(
    const CorpusExportOptions& options, const std::string& out,
    const std::vector<Entry>& entries, int feature_dim) {
  ASGD_RETURN_IF_ERROR(MakeDir(out));
  ASGD_ASSIGN_OR_RETURN(const std::string abs_out, AbsolutePath(out));
  CorpusExportSplit summary;

  ArchiveWriterOptions feats;
  feats.ark_path = abs_out + "/feats.ark";
  feats.scp_path = abs_out + "/feats.scp";
  feats.matrix_format = options.feature_format;
  ASGD_ASSIGN_OR_RETURN(auto feats_writer, ArchiveWriter::Create(feats));
  ArchiveWriterOptions ali;
  ali.ark_path = abs_out + (options.gzip_alignments ? "/pdf.1.gz" : "/pdf.ark");
  ASGD_ASSIGN_OR_RETURN(auto ali_writer, ArchiveWriter::Create(ali));

  std::string utt2spk, text;
  std::map<std::string, std::vector<std::string>> spk2utt;
  std::map<std::string, std::string> speaker_of;
  for (const Entry& e : entries) {
    const corpus::Utterance& u = *e.utt;
    ASGD_RETURN_IF_ERROR(feats_writer->WriteMatrix(e.key, u.features.data(),
                                                   u.num_frames, feature_dim));
    ASGD_RETURN_IF_ERROR(ali_writer->WriteInt32Vector(e.key, u.labels));
    absl::StrAppend(&utt2spk, e.key, " ", e.speaker, "\n");
    absl::StrAppend(&text, e.key, " ", e.text, "\n");
    spk2utt[e.speaker].push_back(e.key);
    speaker_of[e.key] = e.speaker;
    ++summary.utterances;
    summary.frames += u.num_frames;
  }
  summary.feature_bytes = feats_writer->bytes_written();
  ASGD_RETURN_IF_ERROR(feats_writer->Close());
  ASGD_RETURN_IF_ERROR(ali_writer->Close());
  ASGD_RETURN_IF_ERROR(WriteFileAtomically(out + "/utt2spk", utt2spk));
  ASGD_RETURN_IF_ERROR(WriteFileAtomically(out + "/text", text));
  std::string spk2utt_text;
  for (const auto& [spk, utts] : spk2utt) {
    absl::StrAppend(&spk2utt_text, spk);
    for (const std::string& u : utts) absl::StrAppend(&spk2utt_text, " ", u);
    spk2utt_text += "\n";
  }
  ASGD_RETURN_IF_ERROR(WriteFileAtomically(out + "/spk2utt", spk2utt_text));
  summary.speakers = static_cast<int>(spk2utt.size());

  // CMVN statistics of the features as written (decoded when compressed).
  std::map<std::string, DoubleMatrix> stats;
  ASGD_ASSIGN_OR_RETURN(auto reader,
                        SequentialArchiveReader::Open(feats.ark_path));
  Matrix m;
  while (true) {
    ASGD_ASSIGN_OR_RETURN(const bool more, reader->Next());
    if (!more) break;
    ASGD_RETURN_IF_ERROR(reader->ReadMatrix(&m));
    if (m.rows == 0) m.cols = feature_dim;
    AccumulateCmvnStats(m, &stats[speaker_of.at(reader->key())]);
  }
  ArchiveWriterOptions cmvn;
  cmvn.ark_path = abs_out + "/cmvn.ark";
  cmvn.scp_path = abs_out + "/cmvn.scp";
  ASGD_ASSIGN_OR_RETURN(auto cmvn_writer, ArchiveWriter::Create(cmvn));
  for (const auto& [spk, s] : stats) {
    ASGD_RETURN_IF_ERROR(cmvn_writer->WriteDoubleMatrix(spk, s));
  }
  ASGD_RETURN_IF_ERROR(cmvn_writer->Close());
  return summary;
}

}  // namespace

absl::StatusOr<CorpusExportSummary> ExportCorpusToKaldi(
    const CorpusExportOptions& options) {
  if (options.corpus_dir.empty() || options.out_dir.empty()) {
    return absl::InvalidArgumentError(
        "ExportCorpusToKaldi: corpus_dir and out_dir are required");
  }
  ASGD_ASSIGN_OR_RETURN(const corpus::Corpus c,
                        corpus::LoadCorpus(options.corpus_dir));
  CorpusExportSummary summary;
  summary.feature_dim = c.info.feature_dim;
  summary.num_classes = c.info.num_classes;
  if (options.train_copies < 1 || options.train_copies > 1000) {
    return absl::InvalidArgumentError(absl::StrCat(
        "ExportCorpusToKaldi: train_copies must be in [1, 1000], got ",
        options.train_copies));
  }
  ASGD_ASSIGN_OR_RETURN(std::vector<Entry> train,
                        SplitEntries(options.corpus_dir, "train", c.train));
  if (options.train_copies > 1) {
    const size_t n = train.size();
    for (int k = 1; k < options.train_copies; ++k) {
      for (size_t i = 0; i < n; ++i) {
        Entry copy = train[i];
        absl::StrAppend(&copy.key, "-copy", k);
        train.push_back(std::move(copy));
      }
    }
    std::sort(train.begin(), train.end(),
              [](const Entry& a, const Entry& b) { return a.key < b.key; });
  }
  ASGD_ASSIGN_OR_RETURN(std::vector<Entry> heldout,
                        SplitEntries(options.corpus_dir, "heldout", c.heldout));
  ASGD_RETURN_IF_ERROR(MakeDir(options.out_dir));
  std::string classes;
  for (int i = 0; i < c.info.num_classes; ++i) {
    absl::StrAppend(&classes, c.info.class_names[i], " ", i, "\n");
  }
  ASGD_RETURN_IF_ERROR(
      WriteFileAtomically(options.out_dir + "/classes.txt", classes));
  ASGD_ASSIGN_OR_RETURN(summary.train,
                        ExportSplit(options, options.out_dir + "/train", train,
                                    c.info.feature_dim));
  ASGD_ASSIGN_OR_RETURN(summary.heldout,
                        ExportSplit(options, options.out_dir + "/heldout",
                                    heldout, c.info.feature_dim));
  return summary;
}

}  // namespace asgd::kaldi
