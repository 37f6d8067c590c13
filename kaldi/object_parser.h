// Internal to kaldi/object_reader.cc and posterior_object.cc: the byte-level
// parser of one Kaldi object on an InputStream, binary or text: tokens,
// int32 size fields, raw and converted element reads, text matrices and
// vectors, each checked against ReadLimits, with errors as BadDataErrors at
// the object's starting offset (see object_reader.h for the formats and
// error kinds).
//
// Thread-safety: a Parser is used by one thread, for one object; it holds
// pointers to the stream, the limits and the key, which must outlive it.
#ifndef ASGD_KALDI_OBJECT_PARSER_H_
#define ASGD_KALDI_OBJECT_PARSER_H_

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "absl/base/config.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"
#include "kaldi/bad_data.h"
#include "kaldi/input_stream.h"
#include "kaldi/matrix.h"
#include "kaldi/object_reader.h"

#if !defined(ABSL_IS_LITTLE_ENDIAN)
#error "the Kaldi readers assume a little-endian host"
#endif

namespace asgd::kaldi::object_parser {

// Bytes read per step when the stream's size is unknown (gzip): storage grows
// with the data actually read.
constexpr int64_t kChunkBytes = 4 << 20;

inline bool IsSpace(int c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' ||
         c == '\f';
}

// A printable rendering of bytes for messages: "FX" or "\x04\x00".
inline std::string Printable(absl::string_view bytes) {
  std::string out;
  for (unsigned char c : bytes) {
    if (c >= 0x20 && c < 0x7f && c != '\\' && c != '"') {
      out.push_back(static_cast<char>(c));
    } else {
      absl::StrAppendFormat(&out, "\\x%02x", c);
    }
  }
  return out;
}

// One object being parsed: the stream, the limits and where it started.
class Parser {
 public:
  Parser(InputStream* in, const ReadLimits& limits, absl::string_view key)
      : in_(in), limits_(limits), key_(key), start_(in->position()) {}

  InputStream* in() { return in_; }

  absl::Status Error(BadDataReason reason, absl::string_view what) const {
    return BadDataError(reason, {in_->name(), start_, 0, std::string(key_)},
                        what);
  }

  // The data ended early: the stream's read error if there was one.
  absl::Status Truncated(absl::string_view what) const {
    if (!in_->io_status().ok()) return in_->io_status();
    return Error(BadDataReason::kTruncated,
                 absl::StrCat("the data ends at byte ", in_->position(),
                              " inside ", what));
  }

  // Fails early (no allocation) when a known-size stream has fewer than
  // `bytes` left.
  absl::Status CheckRemaining(int64_t bytes, absl::string_view what) const {
    const int64_t left = in_->remaining();
    if (left >= 0 && left < bytes) {
      return Error(BadDataReason::kTruncated,
                   absl::StrCat(what, " needs ", bytes, " bytes from byte ",
                                in_->position(), ", ", left, " remain"));
    }
    return absl::OkStatus();
  }

  absl::Status CheckCount(int64_t count, absl::string_view what) const {
    if (count > limits_.max_elements) {
      return Error(BadDataReason::kTooLarge,
                   absl::StrCat(what, " has ", count,
                                " elements, more than the limit of ",
                                limits_.max_elements));
    }
    return absl::OkStatus();
  }

  // Exactly n bytes, or kTruncated.
  absl::Status Bytes(void* dst, size_t n, absl::string_view what) {
    if (in_->Read(dst, n) != n) return Truncated(what);
    return absl::OkStatus();
  }

  // Consumes "\0B" and returns true, or returns false (text) without
  // consuming anything.
  absl::StatusOr<bool> BinaryHeader() {
    const int c = in_->Peek();
    if (c < 0) return Truncated("an object (nothing follows)");
    if (c != 0) return false;
    in_->Get();
    const int b = in_->Get();
    if (b < 0) return Truncated("the binary header");
    if (b != 'B') {
      return Error(BadDataReason::kMalformedObject,
                   absl::StrFormat("binary header \"\\x00\\x%02x\" is not "
                                   "\"\\0B\"",
                                   b));
    }
    return true;
  }

  // A binary token and the space after it ("FM ", "CM2 "). An int32
  // vector has no token: then returns "" and consumes nothing.
  absl::StatusOr<std::string> Token() {
    if (in_->Peek() == 4) return std::string();
    std::string token;
    while (true) {
      const int c = in_->Get();
      if (c < 0) return Truncated("a token");
      if (c == ' ') {
        if (token.empty()) {
          return Error(BadDataReason::kUnknownToken,
                       "an empty token after the binary header");
        }
        break;
      }
      token.push_back(static_cast<char>(c));
      if (token.size() > 8) {
        return Error(
            BadDataReason::kUnknownToken,
            absl::StrCat("unknown token starting \"", Printable(token), "\""));
      }
    }
    return token;
  }

  // Kaldi's WriteBasicType<int32>: a size byte 4 and 4 bytes.
  absl::Status Int32(int32_t* value, absl::string_view what) {
    unsigned char b[5];
    if (in_->Read(b, 5) != 5) return Truncated(what);
    if (b[0] != 4) {
      return Error(BadDataReason::kMalformedObject,
                   absl::StrCat(what, ": size byte ", int{b[0]},
                                " where 4 (int32) belongs"));
    }
    std::memcpy(value, b + 1, 4);
    return absl::OkStatus();
  }

  // `count` values stored as Src, into `out` as Dst.
  template <typename Src, typename Dst>
  absl::Status Values(int64_t count, std::vector<Dst>* out,
                      absl::string_view what) {
    const int64_t bytes = count * static_cast<int64_t>(sizeof(Src));
    absl::Status s = CheckRemaining(bytes, what);
    if (!s.ok()) return s;
    out->clear();
    if constexpr (std::is_same_v<Src, Dst>) {
      if (in_->remaining() >= 0) {
        out->resize(count);
        return Bytes(out->data(), bytes, what);
      }
      const int64_t step = kChunkBytes / sizeof(Src);
      for (int64_t done = 0; done < count;) {
        const int64_t n = std::min(step, count - done);
        out->resize(done + n);
        s = Bytes(out->data() + done, n * sizeof(Src), what);
        if (!s.ok()) return s;
        done += n;
      }
      return absl::OkStatus();
    } else {
      out->reserve(in_->remaining() >= 0 ? count : 0);
      std::vector<Src> chunk(std::min<int64_t>(count, 1 << 16));
      for (int64_t done = 0; done < count;) {
        const int64_t n = std::min<int64_t>(chunk.size(), count - done);
        s = Bytes(chunk.data(), n * sizeof(Src), what);
        if (!s.ok()) return s;
        for (int64_t i = 0; i < n; ++i) out->push_back(ToReal<Dst>(chunk[i]));
        done += n;
      }
      return absl::OkStatus();
    }
  }

  // Text: skips blanks (and newlines when `newlines`); returns the next byte.
  int SkipBlanks(bool newlines) {
    while (true) {
      const int c = in_->Peek();
      if (c < 0) return c;
      if (c == '\n' && !newlines) return c;
      if (!IsSpace(c)) return c;
      in_->Get();
    }
  }

  // Text: a token up to a blank, ']' or ';'.
  absl::StatusOr<std::string> TextToken() {
    std::string token;
    while (true) {
      const int c = in_->Peek();
      if (c < 0 || IsSpace(c) || c == ']' || c == ';') break;
      token.push_back(static_cast<char>(in_->Get()));
      if (token.size() > 64) {
        return Error(
            BadDataReason::kMalformedObject,
            absl::StrCat("text value \"", Printable(token.substr(0, 20)),
                         "...\" is too long"));
      }
    }
    return token;
  }

  template <typename Real>
  absl::Status TextNumber(const std::string& token, Real* value) {
    double d;
    if (token.empty() || !absl::SimpleAtod(token, &d)) {
      return Error(BadDataReason::kMalformedObject,
                   absl::StrCat("\"", Printable(token), "\" is not a number"));
    }
    *value = ToReal<Real>(d);
    return absl::OkStatus();
  }

  // Text matrix: "[" rows "]" (Kaldi's Matrix::Read in text mode).
  template <typename Real>
  absl::Status TextMatrix(BasicMatrix<Real>* out) {
    const int open = SkipBlanks(true);
    if (open < 0) return Truncated("a text matrix");
    if (open != '[') {
      return Error(BadDataReason::kUnknownToken,
                   absl::StrCat("a text matrix starts with \"[\", not \"",
                                Printable(std::string(1, char(open))), "\""));
    }
    in_->Get();
    std::vector<Real> data;
    int64_t rows = 0, cols = -1, in_row = 0;
    auto end_row = [&]() -> absl::Status {
      if (in_row == 0) return absl::OkStatus();
      if (cols < 0) cols = in_row;
      if (in_row != cols) {
        return Error(BadDataReason::kMalformedObject,
                     absl::StrCat("text matrix row ", rows + 1, " has ", in_row,
                                  " values, row 1 has ", cols));
      }
      ++rows;
      in_row = 0;
      return absl::OkStatus();
    };
    while (true) {
      const int c = in_->Peek();
      if (c < 0) return Truncated("a text matrix");
      if (c == ']') {
        in_->Get();
        if (in_->Peek() == '\r') in_->Get();
        if (in_->Peek() == '\n') in_->Get();
        absl::Status s = end_row();
        if (!s.ok()) return s;
        break;
      }
      if (c == '\n' || c == ';') {
        in_->Get();
        absl::Status s = end_row();
        if (!s.ok()) return s;
        continue;
      }
      if (IsSpace(c)) {
        in_->Get();
        continue;
      }
      auto token = TextToken();
      if (!token.ok()) return token.status();
      Real v;
      absl::Status s = TextNumber(*token, &v);
      if (!s.ok()) return s;
      s = CheckCount(static_cast<int64_t>(data.size()) + 1, "the text matrix");
      if (!s.ok()) return s;
      data.push_back(v);
      ++in_row;
    }
    if (rows > INT32_MAX || cols > INT32_MAX) {
      return Error(BadDataReason::kTooLarge, "text matrix too large");
    }
    out->rows = static_cast<int32_t>(rows);
    out->cols = rows == 0 ? 0 : static_cast<int32_t>(cols);
    out->data = std::move(data);
    return absl::OkStatus();
  }

  // Text vector: "[ v0 v1 ... ]".
  template <typename Real>
  absl::Status TextVector(std::vector<Real>* out) {
    const int open = SkipBlanks(true);
    if (open < 0) return Truncated("a text vector");
    if (open != '[') {
      return Error(BadDataReason::kUnknownToken,
                   absl::StrCat("a text vector starts with \"[\", not \"",
                                Printable(std::string(1, char(open))), "\""));
    }
    in_->Get();
    out->clear();
    while (true) {
      const int c = SkipBlanks(true);
      if (c < 0) return Truncated("a text vector");
      if (c == ']') {
        in_->Get();
        if (in_->Peek() == '\r') in_->Get();
        if (in_->Peek() == '\n') in_->Get();
        return absl::OkStatus();
      }
      auto token = TextToken();
      if (!token.ok()) return token.status();
      Real v;
      absl::Status s = TextNumber(*token, &v);
      if (!s.ok()) return s;
      s = CheckCount(static_cast<int64_t>(out->size()) + 1, "the text vector");
      if (!s.ok()) return s;
      out->push_back(v);
    }
  }

  const ReadLimits& limits() const { return limits_; }

 private:
  InputStream* in_;
  const ReadLimits& limits_;
  absl::string_view key_;
  int64_t start_;
};

}  // namespace asgd::kaldi::object_parser

#endif  // ASGD_KALDI_OBJECT_PARSER_H_
