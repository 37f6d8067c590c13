#include "corpus/corpus_io.h"

#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <map>
#include <utility>

#include "absl/base/config.h"
#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "common/status_macros.h"
#include "common/text_quote.h"
#include "kaldi/input_stream.h"

namespace asgd::corpus {
namespace {

constexpr char kMagic[8] = {'A', 'S', 'G', 'D', 'U', 'T', 'T', '1'};
constexpr absl::string_view kFormat = "asgd-corpus-1";
constexpr size_t kHeaderBytes = sizeof(kMagic) + 2 * sizeof(uint32_t);

absl::Status FileError(const std::string& path, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(path, ": ", what));
}

absl::Status ErrnoError(const std::string& path, absl::string_view action,
                        int err) {
  std::string message =
      absl::StrCat(path, ": cannot ", action, ": ", std::strerror(err));
  if (err == ENOENT) return absl::NotFoundError(message);
  if (err == EACCES || err == EPERM) {
    return absl::PermissionDeniedError(message);
  }
  return absl::UnavailableError(message);
}

// The whole of a regular file (kaldi::OpenRegular: a FIFO, a device or a
// directory is refused without blocking).
absl::StatusOr<std::string> ReadWholeFile(const std::string& path) {
  int64_t size = 0;
  ASGD_ASSIGN_OR_RETURN(const int fd, kaldi::OpenRegular(path, &size));
  std::string data;
  data.reserve(static_cast<size_t>(size));
  char buffer[1 << 16];
  while (true) {
    const ssize_t n = ::read(fd, buffer, sizeof(buffer));
    if (n > 0) {
      data.append(buffer, static_cast<size_t>(n));
    } else if (n == 0) {
      break;
    } else if (errno != EINTR) {
      const int err = errno;
      ::close(fd);
      return ErrnoError(path, "read", err);
    }
  }
  ::close(fd);
  return data;
}

// Little-endian encoding of the 32-bit fields and of float/int32 arrays.
void AppendU32(uint32_t value, std::string* out) {
  char bytes[4];
  for (int i = 0; i < 4; ++i) bytes[i] = static_cast<char>(value >> (8 * i));
  out->append(bytes, 4);
}

uint32_t DecodeU32(const char* p) {
  uint32_t value = 0;
  for (int i = 0; i < 4; ++i) {
    value |= static_cast<uint32_t>(static_cast<unsigned char>(p[i])) << (8 * i);
  }
  return value;
}

// Appends `count` 4-byte values (float or int32) in little-endian order.
template <typename T>
void AppendArray(const T* values, size_t count, std::string* out) {
  static_assert(sizeof(T) == 4);
#if defined(ABSL_IS_LITTLE_ENDIAN)
  out->append(reinterpret_cast<const char*>(values), count * sizeof(T));
#else
  for (size_t i = 0; i < count; ++i) {
    uint32_t bits;
    std::memcpy(&bits, &values[i], 4);
    AppendU32(bits, out);
  }
#endif
}

template <typename T>
void DecodeArray(const char* p, size_t count, T* values) {
  static_assert(sizeof(T) == 4);
#if defined(ABSL_IS_LITTLE_ENDIAN)
  std::memcpy(values, p, count * sizeof(T));
#else
  for (size_t i = 0; i < count; ++i) {
    const uint32_t bits = DecodeU32(p + 4 * i);
    std::memcpy(&values[i], &bits, 4);
  }
#endif
}

// Writes `data` to `path` through a temporary file and a rename, so a reader
// never sees a half-written file under the final name.
absl::Status WriteFileAtomically(const std::string& path,
                                 absl::string_view data) {
  const std::string tmp = absl::StrCat(path, ".tmp");
  std::FILE* file = std::fopen(tmp.c_str(), "wb");
  if (file == nullptr) return ErrnoError(tmp, "create", errno);
  const bool written =
      std::fwrite(data.data(), 1, data.size(), file) == data.size();
  const int write_errno = errno;
  if (std::fclose(file) != 0 || !written) {
    const int err = written ? errno : write_errno;
    std::remove(tmp.c_str());
    return ErrnoError(tmp, "write", err);
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    std::remove(tmp.c_str());
    return ErrnoError(path, "rename into place", err);
  }
  return absl::OkStatus();
}

// corpus.txt: parsed lines, keyed by their first word.
using MetadataLines = std::map<std::string, std::vector<std::string>>;

absl::StatusOr<MetadataLines> ParseMetadata(const std::string& path,
                                            absl::string_view text) {
  MetadataLines lines;
  int line_number = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_number;
    absl::ConsumeSuffix(&line, "\r");
    std::vector<std::string> words =
        absl::StrSplit(line, absl::ByAnyChar(" \t"), absl::SkipEmpty());
    if (words.empty()) continue;
    std::string key = std::move(words.front());
    words.erase(words.begin());
    if (!lines.emplace(key, std::move(words)).second) {
      return FileError(path,
                       absl::StrCat("line ", line_number, ": duplicate key \"",
                                    EscapeForMessage(key), "\""));
    }
  }
  return lines;
}

// Returns the values of `key`, which must be present.
absl::StatusOr<const std::vector<std::string>*> Values(
    const std::string& path, const MetadataLines& lines,
    absl::string_view key) {
  auto it = lines.find(std::string(key));
  if (it == lines.end()) {
    return FileError(path, absl::StrCat("missing key \"", key, "\""));
  }
  return &it->second;
}

// Returns the single value of `key`.
absl::StatusOr<std::string> SingleValue(const std::string& path,
                                        const MetadataLines& lines,
                                        absl::string_view key) {
  ASGD_ASSIGN_OR_RETURN(const std::vector<std::string>* values,
                        Values(path, lines, key));
  if (values->size() != 1) {
    return FileError(path, absl::StrCat("key \"", key, "\" needs 1 value, has ",
                                        values->size()));
  }
  return values->front();
}

absl::StatusOr<int> PositiveInt(const std::string& path,
                                const MetadataLines& lines,
                                absl::string_view key) {
  ASGD_ASSIGN_OR_RETURN(std::string text, SingleValue(path, lines, key));
  int value;
  if (!absl::SimpleAtoi(text, &value) || value <= 0) {
    return FileError(
        path, absl::StrCat("key \"", key, "\" needs a positive integer, got \"",
                           EscapeForMessage(text), "\""));
  }
  return value;
}

absl::StatusOr<std::vector<float>> FloatVector(const std::string& path,
                                               const MetadataLines& lines,
                                               absl::string_view key,
                                               size_t size, bool positive) {
  ASGD_ASSIGN_OR_RETURN(const std::vector<std::string>* values,
                        Values(path, lines, key));
  if (values->size() != size) {
    return FileError(path, absl::StrCat("key \"", key, "\" needs ", size,
                                        " values, has ", values->size()));
  }
  std::vector<float> result(size);
  for (size_t i = 0; i < size; ++i) {
    const std::string& text = (*values)[i];
    if (!absl::SimpleAtof(text, &result[i]) || !std::isfinite(result[i]) ||
        (positive && !(result[i] > 0))) {
      return FileError(
          path, absl::StrCat("key \"", key, "\" value ", i, " is not a ",
                             positive ? "positive " : "", "finite number: \"",
                             EscapeForMessage(text), "\""));
    }
  }
  return result;
}

// Part file names must name files inside the corpus directory.
absl::StatusOr<std::vector<std::string>> FileList(const std::string& path,
                                                  const MetadataLines& lines,
                                                  absl::string_view key) {
  ASGD_ASSIGN_OR_RETURN(const std::vector<std::string>* values,
                        Values(path, lines, key));
  for (const std::string& name : *values) {
    if (name == "." || name == ".." || name.find('/') != std::string::npos) {
      return FileError(
          path, absl::StrCat("key \"", key, "\": \"", EscapeForMessage(name),
                             "\" is not a plain file name"));
    }
  }
  return *values;
}

absl::StatusOr<CorpusInfo> ParseCorpusInfo(const std::string& path,
                                           absl::string_view text,
                                           std::vector<std::string>* train,
                                           std::vector<std::string>* heldout) {
  ASGD_ASSIGN_OR_RETURN(MetadataLines lines, ParseMetadata(path, text));
  static constexpr absl::string_view kKeys[] = {
      "format", "feature_dim", "num_classes", "classes",      "mean",
      "stddev", "seed",        "train_files", "heldout_files"};
  for (const auto& [key, values] : lines) {
    bool known = false;
    for (absl::string_view k : kKeys) known = known || key == k;
    if (!known)
      return FileError(
          path, absl::StrCat("unknown key \"", EscapeForMessage(key), "\""));
  }
  ASGD_ASSIGN_OR_RETURN(std::string format, SingleValue(path, lines, "format"));
  if (format != kFormat) {
    return FileError(path,
                     absl::StrCat("format is \"", EscapeForMessage(format),
                                  "\", expected \"", kFormat, "\""));
  }
  CorpusInfo info;
  ASGD_ASSIGN_OR_RETURN(info.feature_dim,
                        PositiveInt(path, lines, "feature_dim"));
  ASGD_ASSIGN_OR_RETURN(info.num_classes,
                        PositiveInt(path, lines, "num_classes"));
  ASGD_ASSIGN_OR_RETURN(const std::vector<std::string>* classes,
                        Values(path, lines, "classes"));
  if (classes->size() != static_cast<size_t>(info.num_classes)) {
    return FileError(path, absl::StrCat("num_classes is ", info.num_classes,
                                        " but \"classes\" lists ",
                                        classes->size(), " names"));
  }
  info.class_names = *classes;
  ASGD_ASSIGN_OR_RETURN(
      info.mean, FloatVector(path, lines, "mean", info.feature_dim, false));
  ASGD_ASSIGN_OR_RETURN(
      info.stddev, FloatVector(path, lines, "stddev", info.feature_dim, true));
  ASGD_ASSIGN_OR_RETURN(std::string seed, SingleValue(path, lines, "seed"));
  if (!absl::SimpleAtoi(seed, &info.seed)) {
    return FileError(path, absl::StrCat("seed \"", EscapeForMessage(seed),
                                        "\" is not an unsigned integer"));
  }
  ASGD_ASSIGN_OR_RETURN(*train, FileList(path, lines, "train_files"));
  if (train->empty()) return FileError(path, "\"train_files\" lists no file");
  ASGD_ASSIGN_OR_RETURN(*heldout, FileList(path, lines, "heldout_files"));
  return info;
}

// ReadUtteranceFile's work; with `normaliser`, the features are checked
// normalised too.
absl::StatusOr<std::vector<Utterance>> ReadPart(
    const std::string& path, int feature_dim, int num_classes,
    const CorpusReadOptions& options, const FeatureNormaliser* normaliser,
    kaldi::BadDataCounts* bad);

// Reads the listed part files of one split into `utterances`.
absl::Status ReadSplit(const std::string& dir, const std::string& metadata_path,
                       const std::vector<std::string>& files,
                       const CorpusInfo& info, const CorpusReadOptions& options,
                       const FeatureNormaliser& normaliser,
                       std::vector<Utterance>* utterances, int64_t* frames,
                       kaldi::BadDataCounts* bad) {
  for (const std::string& name : files) {
    const std::string path = absl::StrCat(dir, "/", name);
    absl::StatusOr<std::vector<Utterance>> part = ReadPart(
        path, info.feature_dim, info.num_classes, options, &normaliser, bad);
    if (absl::IsNotFound(part.status())) {
      return FileError(
          metadata_path,
          absl::StrCat("lists \"", EscapeForMessage(name),
                       "\", which is missing (", part.status().message(), ")"));
    }
    if (!part.ok()) return part.status();
    for (Utterance& utterance : *part) {
      *frames += utterance.num_frames;
      utterances->push_back(std::move(utterance));
    }
  }
  return absl::OkStatus();
}

}  // namespace

FeatureNormaliser::FeatureNormaliser(const CorpusInfo& info)
    : mean_(info.feature_dim, 0.0f), inv_stddev_(info.feature_dim, 1.0f) {
  for (int d = 0; d < info.feature_dim; ++d) {
    if (d < static_cast<int>(info.mean.size())) mean_[d] = info.mean[d];
    if (d < static_cast<int>(info.stddev.size()) && info.stddev[d] > 1e-6f) {
      inv_stddev_[d] = 1.0f / info.stddev[d];
    }
  }
}

absl::StatusOr<Corpus> LoadCorpus(const std::string& dir,
                                  const CorpusReadOptions& options) {
  if (!(options.max_feature_magnitude > 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_feature_magnitude must be > 0, not ",
                     options.max_feature_magnitude));
  }
  const std::string metadata_path = absl::StrCat(dir, "/corpus.txt");
  ASGD_ASSIGN_OR_RETURN(std::string text, ReadWholeFile(metadata_path));
  Corpus corpus;
  std::vector<std::string> train_files;
  std::vector<std::string> heldout_files;
  ASGD_ASSIGN_OR_RETURN(
      corpus.info,
      ParseCorpusInfo(metadata_path, text, &train_files, &heldout_files));
  const FeatureNormaliser normaliser(corpus.info);
  ASGD_RETURN_IF_ERROR(ReadSplit(dir, metadata_path, train_files, corpus.info,
                                 options, normaliser, &corpus.train,
                                 &corpus.train_frames, &corpus.bad));
  ASGD_RETURN_IF_ERROR(ReadSplit(dir, metadata_path, heldout_files, corpus.info,
                                 options, normaliser, &corpus.heldout,
                                 &corpus.heldout_frames, &corpus.bad));
  return corpus;
}

absl::Status WriteUtteranceFile(const std::string& path, int feature_dim,
                                const std::vector<Utterance>& utterances) {
  if (feature_dim <= 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": feature_dim must be positive, got ", feature_dim));
  }
  if (utterances.size() > std::numeric_limits<uint32_t>::max()) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": too many utterances: ", utterances.size()));
  }
  size_t bytes = kHeaderBytes;
  for (size_t i = 0; i < utterances.size(); ++i) {
    const Utterance& u = utterances[i];
    if (u.num_frames < 0 || u.voice < 0 ||
        u.features.size() != static_cast<size_t>(u.num_frames) * feature_dim ||
        u.labels.size() != static_cast<size_t>(u.num_frames)) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": utterance ", i, " is inconsistent: num_frames ",
                       u.num_frames, ", voice ", u.voice, ", ",
                       u.features.size(), " feature values for dim ",
                       feature_dim, ", ", u.labels.size(), " labels"));
    }
    bytes += 2 * sizeof(uint32_t) + u.features.size() * sizeof(float) +
             u.labels.size() * sizeof(int32_t);
  }
  std::string data;
  data.reserve(bytes);
  data.append(kMagic, sizeof(kMagic));
  AppendU32(static_cast<uint32_t>(feature_dim), &data);
  AppendU32(static_cast<uint32_t>(utterances.size()), &data);
  for (const Utterance& u : utterances) {
    AppendU32(static_cast<uint32_t>(u.num_frames), &data);
    AppendU32(static_cast<uint32_t>(u.voice), &data);
    AppendArray(u.features.data(), u.features.size(), &data);
    AppendArray(u.labels.data(), u.labels.size(), &data);
  }
  return WriteFileAtomically(path, data);
}

absl::StatusOr<std::vector<Utterance>> ReadUtteranceFile(
    const std::string& path, int feature_dim, int num_classes,
    const CorpusReadOptions& options, kaldi::BadDataCounts* bad) {
  if (!(options.max_feature_magnitude > 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_feature_magnitude must be > 0, not ",
                     options.max_feature_magnitude));
  }
  return ReadPart(path, feature_dim, num_classes, options, nullptr, bad);
}

namespace {

absl::StatusOr<std::vector<Utterance>> ReadPart(
    const std::string& path, int feature_dim, int num_classes,
    const CorpusReadOptions& options, const FeatureNormaliser* normaliser,
    kaldi::BadDataCounts* bad) {
  if (feature_dim <= 0 || num_classes <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": feature_dim (", feature_dim,
                     ") and num_classes (", num_classes, ") must be positive"));
  }
  ASGD_ASSIGN_OR_RETURN(std::string data, ReadWholeFile(path));
  if (data.size() < kHeaderBytes) {
    return FileError(path, absl::StrCat("truncated: ", data.size(),
                                        " bytes, shorter than the ",
                                        kHeaderBytes, "-byte header"));
  }
  if (std::memcmp(data.data(), kMagic, sizeof(kMagic)) != 0) {
    return FileError(path, "bad magic, not an ASGDUTT1 utterance file");
  }
  const uint32_t file_dim = DecodeU32(data.data() + 8);
  if (file_dim != static_cast<uint32_t>(feature_dim)) {
    return FileError(path, absl::StrCat("feature_dim mismatch: file has ",
                                        file_dim, ", expected ", feature_dim));
  }
  const uint32_t num_utterances = DecodeU32(data.data() + 12);
  // Every utterance needs at least its 8-byte header: reject absurd counts
  // before reserving memory for them.
  size_t offset = kHeaderBytes;
  if (num_utterances > (data.size() - offset) / 8) {
    return FileError(path,
                     absl::StrCat("truncated: header promises ", num_utterances,
                                  " utterances in ", data.size(), " bytes"));
  }
  std::vector<Utterance> utterances(num_utterances);
  size_t kept = 0;  // utterances[0, kept) are those not left out
  std::vector<float> normalised;
  const uint64_t frame_bytes =
      static_cast<uint64_t>(feature_dim) * sizeof(float) + sizeof(int32_t);
  for (uint32_t i = 0; i < num_utterances; ++i) {
    const size_t start = offset;
    if (data.size() - offset < 8) {
      return FileError(path, absl::StrCat("truncated in utterance ", i, " of ",
                                          num_utterances));
    }
    const uint32_t num_frames = DecodeU32(data.data() + offset);
    const uint32_t voice = DecodeU32(data.data() + offset + 4);
    offset += 8;
    if (num_frames > static_cast<uint32_t>(std::numeric_limits<int>::max()) ||
        voice > static_cast<uint32_t>(std::numeric_limits<int>::max())) {
      return FileError(
          path, absl::StrCat("utterance ", i, ": num_frames ", num_frames,
                             " or voice ", voice, " out of range"));
    }
    if (num_frames > (data.size() - offset) / frame_bytes) {
      return FileError(
          path, absl::StrCat("truncated in utterance ", i, " of ",
                             num_utterances, ": ", num_frames, " frames need ",
                             num_frames * frame_bytes, " bytes, ",
                             data.size() - offset, " left"));
    }
    Utterance& u = utterances[kept];
    u.voice = static_cast<int>(voice);
    u.num_frames = static_cast<int>(num_frames);
    u.features.resize(static_cast<size_t>(num_frames) * feature_dim);
    DecodeArray(data.data() + offset, u.features.size(), u.features.data());
    offset += u.features.size() * sizeof(float);
    u.labels.resize(num_frames);
    DecodeArray(data.data() + offset, u.labels.size(), u.labels.data());
    offset += u.labels.size() * sizeof(int32_t);
    for (uint32_t t = 0; t < num_frames; ++t) {
      if (u.labels[t] < 0 || u.labels[t] >= num_classes) {
        return FileError(
            path,
            absl::StrCat("utterance ", i, ", frame ", t, ": label ",
                         u.labels[t], " out of range [0, ", num_classes, ")"));
      }
    }
    // The features as stored, then as the worker normalises them.
    const kaldi::DataLocation where{path, static_cast<int64_t>(start), 0,
                                    absl::StrCat("#", i)};
    absl::Status s = kaldi::CheckFeatureValues(u.features, feature_dim,
                                               options.max_feature_magnitude,
                                               where, "as stored");
    if (s.ok() && normaliser != nullptr) {
      normalised.resize(u.features.size());
      for (size_t j = 0; j < normalised.size(); ++j) {
        normalised[j] =
            (*normaliser)(static_cast<int>(j % feature_dim), u.features[j]);
      }
      s = kaldi::CheckFeatureValues(
          normalised, feature_dim, options.max_feature_magnitude, where,
          "after the corpus's normalisation (corpus.txt's mean and stddev)");
    }
    if (!s.ok()) {
      if (options.policy == kaldi::BadDataPolicy::kRefuse) return s;
      if (bad != nullptr) bad->Add(kaldi::BadDataReasonOf(s));
      if (options.on_skip) options.on_skip(s);
      continue;
    }
    ++kept;
  }
  if (offset != data.size()) {
    return FileError(
        path, absl::StrCat(data.size() - offset, " trailing bytes after ",
                           num_utterances, " utterances"));
  }
  utterances.resize(kept);
  return utterances;
}

}  // namespace

}  // namespace asgd::corpus
