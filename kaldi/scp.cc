#include "kaldi/scp.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace asgd::kaldi {
namespace {

// "r0:r1" (inclusive) or ":" into [*begin, *last]; ":" leaves them alone.
bool ParseSpan(absl::string_view text, int32_t* begin, int32_t* last) {
  text = absl::StripAsciiWhitespace(text);
  if (text == ":") return true;
  const std::vector<absl::string_view> parts = absl::StrSplit(text, ':');
  if (parts.size() != 2) return false;
  int32_t a, b;
  if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(parts[0]), &a) ||
      !absl::SimpleAtoi(absl::StripAsciiWhitespace(parts[1]), &b)) {
    return false;
  }
  if (a < 0 || b < a) return false;
  *begin = a;
  *last = b;
  return true;
}

bool AllDigits(absl::string_view s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (!absl::ascii_isdigit(static_cast<unsigned char>(c))) return false;
  }
  return true;
}

}  // namespace

std::string Rxfilename::ToString() const {
  std::string out = path;
  if (has_offset) absl::StrAppend(&out, ":", offset);
  if (has_range) {
    auto span = [](int32_t b, int32_t l) {
      return l < 0 ? std::string(":") : absl::StrCat(b, ":", l);
    };
    absl::StrAppend(&out, "[", span(range.row_begin, range.row_last));
    if (range.col_last >= 0) {
      absl::StrAppend(&out, ",", span(range.col_begin, range.col_last));
    }
    out.push_back(']');
  }
  return out;
}

absl::StatusOr<Rxfilename> ParseRxfilename(absl::string_view text,
                                           const DataLocation& where) {
  text = absl::StripAsciiWhitespace(text);
  auto unsupported = [&](absl::string_view what) {
    return absl::UnimplementedError(
        absl::StrCat(FormatLocation(where), ": ", what, " \"", text,
                     "\" is not supported: the Kaldi reader reads files "
                     "(path.ark:OFFSET); write the pipe's output to an "
                     "archive first (e.g. copy-feats \"scp:...\" "
                     "ark,scp:feats.ark,feats.scp)"));
  };
  if (text.empty() || text == "-") return unsupported("stdin rxfilename");
  if (text.front() == '|') return unsupported("output pipe");
  if (text.back() == '|') return unsupported("input pipe");
  Rxfilename rx;
  if (text.back() != ']' && text.find('[') != absl::string_view::npos) {
    return BadDataError(BadDataReason::kMalformedLine, where,
                        absl::StrCat("range in \"", text, "\" has no ']'"));
  }
  if (text.back() == ']') {
    const size_t open = text.rfind('[');
    if (open == absl::string_view::npos) {
      return BadDataError(BadDataReason::kMalformedLine, where,
                          absl::StrCat("range in \"", text, "\" has no '['"));
    }
    const absl::string_view spec =
        text.substr(open + 1, text.size() - open - 2);
    const std::vector<absl::string_view> parts = absl::StrSplit(spec, ',');
    bool ok = parts.size() == 1 || parts.size() == 2;
    if (ok) {
      ok = ParseSpan(parts[0], &rx.range.row_begin, &rx.range.row_last);
    }
    if (ok && parts.size() == 2) {
      ok = ParseSpan(parts[1], &rx.range.col_begin, &rx.range.col_last);
    }
    if (!ok) {
      return BadDataError(
          BadDataReason::kMalformedLine, where,
          absl::StrCat("bad range \"[", spec,
                       "\" (want [r0:r1] or [r0:r1,c0:c1], inclusive, "
                       "r0 <= r1)"));
    }
    rx.has_range = true;
    text = absl::StripAsciiWhitespace(text.substr(0, open));
  }
  const size_t colon = text.rfind(':');
  if (colon != absl::string_view::npos) {
    const absl::string_view tail = text.substr(colon + 1);
    if (AllDigits(tail)) {
      if (!absl::SimpleAtoi(tail, &rx.offset)) {
        return BadDataError(BadDataReason::kMalformedLine, where,
                            absl::StrCat("offset \"", tail, "\" is too large"));
      }
      rx.has_offset = true;
      text = text.substr(0, colon);
    } else if (!tail.empty() &&
               absl::ascii_isdigit(static_cast<unsigned char>(tail[0]))) {
      return BadDataError(
          BadDataReason::kMalformedLine, where,
          absl::StrCat("offset \"", tail, "\" is not a number"));
    }
  }
  if (text.empty()) {
    return BadDataError(BadDataReason::kMalformedLine, where,
                        "the rxfilename has no path");
  }
  rx.path = std::string(text);
  return rx;
}

absl::Status ApplyRange(const MatrixRange& range, const DataLocation& where,
                        Matrix* m) {
  int32_t r0 = range.row_begin, r1 = range.row_last;
  int32_t c0 = range.col_begin, c1 = range.col_last;
  if (r1 < 0) {
    r0 = 0;
    r1 = m->rows - 1;
  }
  if (c1 < 0) {
    c0 = 0;
    c1 = m->cols - 1;
  }
  // Kaldi accepts a last row up to 3 past the last one and clamps it.
  if (range.row_last >= 0 && r1 < int64_t{m->rows} + 3) {
    r1 = std::min(r1, m->rows - 1);
  }
  if (r0 > r1 || r1 >= m->rows || c0 > c1 || c1 >= m->cols) {
    return BadDataError(
        BadDataReason::kBadRange, where,
        absl::StrCat("range rows ", range.row_begin, ":", range.row_last,
                     ", columns ", range.col_begin, ":", range.col_last,
                     " is outside the ", m->rows, " x ", m->cols, " matrix"));
  }
  if (r0 == 0 && r1 == m->rows - 1 && c0 == 0 && c1 == m->cols - 1) {
    return absl::OkStatus();
  }
  const int32_t rows = r1 - r0 + 1, cols = c1 - c0 + 1;
  std::vector<float> out(static_cast<size_t>(int64_t{rows} * cols));
  for (int32_t r = 0; r < rows; ++r) {
    const float* src = m->row(r0 + r) + c0;
    std::copy(src, src + cols, out.begin() + int64_t{r} * cols);
  }
  m->rows = rows;
  m->cols = cols;
  m->data = std::move(out);
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<TextTableReader>> TextTableReader::Open(
    const std::string& path, int32_t max_line_bytes) {
  auto in = InputStream::OpenSequential(path, 64 * 1024);
  if (!in.ok()) return in.status();
  return std::unique_ptr<TextTableReader>(
      new TextTableReader(*std::move(in), max_line_bytes));
}

absl::StatusOr<bool> TextTableReader::Next(std::string* key,
                                           std::string* value) {
  std::string line;
  while (true) {
    line.clear();
    const int64_t start = in_->position();
    bool too_long = false;
    int c;
    while ((c = in_->Get()) >= 0 && c != '\n') {
      if (static_cast<int64_t>(line.size()) < max_line_bytes_) {
        line.push_back(static_cast<char>(c));
      } else {
        too_long = true;
      }
    }
    if (c < 0 && !in_->io_status().ok()) return in_->io_status();
    if (c < 0 && line.empty() && !too_long) return false;
    ++line_;
    line_offset_ = start;
    const absl::string_view text = absl::StripAsciiWhitespace(line);
    if (text.empty() && !too_long) continue;
    ++entries_;
    const size_t split = text.find_first_of(" \t");
    *key = std::string(text.substr(0, split));
    *value = split == absl::string_view::npos
                 ? std::string()
                 : std::string(absl::StripAsciiWhitespace(text.substr(split)));
    if (too_long) {
      return BadDataError(
          BadDataReason::kMalformedLine, {path(), start, line_, *key},
          absl::StrCat("line longer than ", max_line_bytes_, " bytes"));
    }
    return true;
  }
}

absl::StatusOr<std::unique_ptr<ScpReader>> ScpReader::Open(
    const std::string& path, const ScpOptions& options) {
  auto table = TextTableReader::Open(path, options.max_line_bytes);
  if (!table.ok()) return table.status();
  return std::unique_ptr<ScpReader>(new ScpReader(*std::move(table), options));
}

absl::StatusOr<bool> ScpReader::Next(ScpEntry* entry) {
  std::string value;
  absl::StatusOr<bool> more = table_->Next(&entry->key, &value);
  entry->line = table_->line();
  entry->line_offset = table_->line_offset();
  entry->index = table_->entries() - 1;
  if (!more.ok() || !*more) return more;
  const DataLocation where{path(), entry->line_offset, entry->line, entry->key};
  if (value.empty()) {
    return BadDataError(BadDataReason::kMalformedLine, where,
                        "the line has a key but no rxfilename");
  }
  auto rx = ParseRxfilename(value, where);
  if (!rx.ok()) return rx.status();
  entry->rx = *std::move(rx);
  if (!options_.base_dir.empty() && entry->rx.path.front() != '/') {
    entry->rx.path = absl::StrCat(options_.base_dir, "/", entry->rx.path);
  }
  return true;
}

}  // namespace asgd::kaldi
