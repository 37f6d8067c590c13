#include "kaldi/object_reader.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>
#include <utility>

#include "absl/base/config.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "kaldi/bad_data.h"
#include "kaldi/compressed_matrix.h"

#if !defined(ABSL_IS_LITTLE_ENDIAN)
#error "the Kaldi readers assume a little-endian host"
#endif

namespace asgd::kaldi {
namespace {

// Bytes read per step when the stream's size is unknown (gzip): storage grows
// with the data actually read.
constexpr int64_t kChunkBytes = 4 << 20;

inline bool IsSpace(int c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' ||
         c == '\f';
}

// A printable rendering of bytes for messages: "FX" or "\x04\x00".
std::string Printable(absl::string_view bytes) {
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

absl::Status WrongKind(const Parser& p, const std::string& token,
                       absl::string_view wanted) {
  std::string found;
  if (token.empty()) {
    found = "an int32 vector";
  } else if (token == "FM" || token == "DM" || token == "CM" ||
             token == "CM2" || token == "CM3") {
    found = absl::StrCat("a matrix (", token, ")");
  } else if (token == "FV" || token == "DV") {
    found = absl::StrCat("a vector (", token, ")");
  } else {
    return p.Error(BadDataReason::kUnknownToken,
                   absl::StrCat("unknown token \"", Printable(token),
                                "\" where ", wanted, " belongs"));
  }
  return p.Error(BadDataReason::kUnknownToken,
                 absl::StrCat("found ", found, " where ", wanted, " belongs"));
}

template <typename Real>
absl::Status ReadCompressed(Parser& p, CompressedFormat format,
                            BasicMatrix<Real>* out) {
  unsigned char raw[kCompressedHeaderBytes];
  absl::Status s = p.Bytes(raw, sizeof(raw), "a compressed matrix header");
  if (!s.ok()) return s;
  CompressedHeader h;
  std::memcpy(&h.min_value, raw, 4);
  std::memcpy(&h.range, raw + 4, 4);
  std::memcpy(&h.rows, raw + 8, 4);
  std::memcpy(&h.cols, raw + 12, 4);
  if (h.rows < 0 || h.cols < 0) {
    return p.Error(
        BadDataReason::kMalformedObject,
        absl::StrCat("compressed matrix of ", h.rows, " x ", h.cols));
  }
  const int64_t count = int64_t{h.rows} * h.cols;
  s = p.CheckCount(count, "the compressed matrix");
  if (!s.ok()) return s;
  if (count > 0 && !(std::isfinite(h.min_value) && std::isfinite(h.range))) {
    return p.Error(BadDataReason::kMalformedObject,
                   absl::StrCat("compressed matrix header has min ",
                                h.min_value, " and range ", h.range));
  }
  // Kaldi's writer widens the range of a constant matrix (to 1 + |min|), so
  // a range of 0 or less is never written: it would decode every value to
  // min, hiding whatever the data was.
  if (count > 0 && !(h.range > 0)) {
    return p.Error(BadDataReason::kMalformedObject,
                   absl::StrCat("compressed matrix header has range ", h.range,
                                " (min ", h.min_value,
                                "): it would decode to a constant matrix, and "
                                "Kaldi never writes a range <= 0"));
  }
  const int64_t payload = CompressedPayloadBytes(format, h.rows, h.cols);
  std::vector<unsigned char> bytes;
  s = p.Values<unsigned char>(payload, &bytes, "the compressed matrix data");
  if (!s.ok()) return s;
  out->rows = h.rows;
  out->cols = h.cols;
  if constexpr (std::is_same_v<Real, float>) {
    out->data.resize(count);
    DecodeCompressed(format, h, bytes.data(), out->data.data());
  } else {
    std::vector<float> decoded(count);
    DecodeCompressed(format, h, bytes.data(), decoded.data());
    out->data.assign(decoded.begin(), decoded.end());
  }
  return absl::OkStatus();
}

template <typename Real>
absl::Status ReadMatrixT(InputStream* in, const ReadLimits& limits,
                         absl::string_view key, BasicMatrix<Real>* out,
                         ObjectFormat* format) {
  Parser p(in, limits, key);
  auto binary = p.BinaryHeader();
  if (!binary.ok()) return binary.status();
  if (!*binary) {
    if (format != nullptr) *format = ObjectFormat::kTextMatrix;
    return p.TextMatrix(out);
  }
  auto token = p.Token();
  if (!token.ok()) return token.status();
  if (*token == "CM" || *token == "CM2" || *token == "CM3") {
    const CompressedFormat f = *token == "CM"
                                   ? CompressedFormat::kOneByteWithColHeaders
                               : *token == "CM2" ? CompressedFormat::kTwoByte
                                                 : CompressedFormat::kOneByte;
    if (format != nullptr) {
      *format = *token == "CM"    ? ObjectFormat::kCompressedCM
                : *token == "CM2" ? ObjectFormat::kCompressedCM2
                                  : ObjectFormat::kCompressedCM3;
    }
    return ReadCompressed(p, f, out);
  }
  if (*token != "FM" && *token != "DM") return WrongKind(p, *token, "a matrix");
  int32_t rows, cols;
  absl::Status s = p.Int32(&rows, "the row count");
  if (!s.ok()) return s;
  s = p.Int32(&cols, "the column count");
  if (!s.ok()) return s;
  if (rows < 0 || cols < 0) {
    return p.Error(BadDataReason::kMalformedObject,
                   absl::StrCat("matrix of ", rows, " x ", cols));
  }
  const int64_t count = int64_t{rows} * cols;
  s = p.CheckCount(count, "the matrix");
  if (!s.ok()) return s;
  out->rows = rows;
  out->cols = cols;
  if (*token == "FM") {
    if (format != nullptr) *format = ObjectFormat::kFloatMatrix;
    return p.Values<float>(count, &out->data, "the FM data");
  }
  if (format != nullptr) *format = ObjectFormat::kDoubleMatrix;
  return p.Values<double>(count, &out->data, "the DM data");
}

}  // namespace

absl::StatusOr<bool> ReadArchiveKey(InputStream* in, const ReadLimits& limits,
                                    std::string* key) {
  key->clear();
  int c;
  while ((c = in->Peek()) >= 0 && IsSpace(c)) in->Get();
  if (c < 0) {
    if (!in->io_status().ok()) return in->io_status();
    return false;
  }
  const int64_t start = in->position();
  while ((c = in->Peek()) >= 0 && !IsSpace(c)) {
    key->push_back(static_cast<char>(in->Get()));
    if (static_cast<int64_t>(key->size()) > limits.max_key_bytes) {
      return BadDataError(
          BadDataReason::kMalformedObject, {in->name(), start},
          absl::StrCat("a key longer than ", limits.max_key_bytes,
                       " bytes (starting \"", Printable(key->substr(0, 32)),
                       "\"): not a Kaldi archive?"));
    }
  }
  if (c < 0) {
    if (!in->io_status().ok()) return in->io_status();
    return BadDataError(BadDataReason::kTruncated, {in->name(), start, 0, *key},
                        "the archive ends after the key");
  }
  if (c == ' ' || c == '\t') {
    in->Get();
  } else if (c != '\n') {
    return BadDataError(
        BadDataReason::kMalformedObject, {in->name(), start, 0, *key},
        absl::StrFormat("the key is followed by byte 0x%02x, not a space", c));
  }
  return true;
}

absl::Status ReadMatrixObject(InputStream* in, const ReadLimits& limits,
                              absl::string_view key, Matrix* out,
                              ObjectFormat* format) {
  return ReadMatrixT(in, limits, key, out, format);
}

absl::Status ReadMatrixObject(InputStream* in, const ReadLimits& limits,
                              absl::string_view key, DoubleMatrix* out,
                              ObjectFormat* format) {
  return ReadMatrixT(in, limits, key, out, format);
}

absl::Status ReadFloatVectorObject(InputStream* in, const ReadLimits& limits,
                                   absl::string_view key,
                                   std::vector<float>* out,
                                   ObjectFormat* format) {
  Parser p(in, limits, key);
  auto binary = p.BinaryHeader();
  if (!binary.ok()) return binary.status();
  if (!*binary) {
    if (format != nullptr) *format = ObjectFormat::kTextVector;
    return p.TextVector(out);
  }
  auto token = p.Token();
  if (!token.ok()) return token.status();
  if (*token != "FV" && *token != "DV") {
    return WrongKind(p, *token, "a float vector");
  }
  int32_t dim;
  absl::Status s = p.Int32(&dim, "the vector dimension");
  if (!s.ok()) return s;
  if (dim < 0) {
    return p.Error(BadDataReason::kMalformedObject,
                   absl::StrCat("vector of dimension ", dim));
  }
  s = p.CheckCount(dim, "the vector");
  if (!s.ok()) return s;
  if (*token == "FV") {
    if (format != nullptr) *format = ObjectFormat::kFloatVector;
    return p.Values<float>(dim, out, "the FV data");
  }
  if (format != nullptr) *format = ObjectFormat::kDoubleVector;
  return p.Values<double>(dim, out, "the DV data");
}

absl::Status ReadInt32VectorObject(InputStream* in, const ReadLimits& limits,
                                   absl::string_view key,
                                   std::vector<int32_t>* out,
                                   ObjectFormat* format) {
  Parser p(in, limits, key);
  auto binary = p.BinaryHeader();
  if (!binary.ok()) return binary.status();
  out->clear();
  if (!*binary) {
    // Text: integers up to the end of the line.
    if (format != nullptr) *format = ObjectFormat::kTextInt32Vector;
    int64_t line_bytes = 0;
    while (true) {
      const int c = p.SkipBlanks(false);
      if (c < 0) {
        if (!in->io_status().ok()) return in->io_status();
        return absl::OkStatus();
      }
      if (c == '\n') {
        in->Get();
        return absl::OkStatus();
      }
      auto token = p.TextToken();
      if (!token.ok()) return token.status();
      int32_t v;
      if (token->empty() || !absl::SimpleAtoi(*token, &v)) {
        if (token->empty())
          token = std::string(1, static_cast<char>(in->Get()));
        return p.Error(BadDataReason::kMalformedObject,
                       absl::StrCat("\"", Printable(*token),
                                    "\" is not an int32 in a text int32 "
                                    "vector"));
      }
      line_bytes += static_cast<int64_t>(token->size()) + 1;
      if (line_bytes > p.limits().max_text_line_bytes) {
        return p.Error(BadDataReason::kTooLarge,
                       "the text int32 vector's line is too long");
      }
      absl::Status s = p.CheckCount(static_cast<int64_t>(out->size()) + 1,
                                    "the int32 vector");
      if (!s.ok()) return s;
      out->push_back(v);
    }
  }
  auto token = p.Token();
  if (!token.ok()) return token.status();
  if (!token->empty()) return WrongKind(p, *token, "an int32 vector");
  if (format != nullptr) *format = ObjectFormat::kInt32Vector;
  int32_t n;
  absl::Status s = p.Int32(&n, "the int32 vector length");
  if (!s.ok()) return s;
  if (n < 0) {
    return p.Error(BadDataReason::kMalformedObject,
                   absl::StrCat("int32 vector of length ", n));
  }
  s = p.CheckCount(n, "the int32 vector");
  if (!s.ok()) return s;
  // n × (size byte 4, int32).
  std::vector<unsigned char> raw;
  s = p.Values<unsigned char>(int64_t{n} * 5, &raw, "the int32 vector data");
  if (!s.ok()) return s;
  out->resize(n);
  for (int32_t i = 0; i < n; ++i) {
    const unsigned char* e = raw.data() + 5 * int64_t{i};
    if (e[0] != 4) {
      return p.Error(BadDataReason::kMalformedObject,
                     absl::StrCat("element ", i,
                                  " of the int32 vector has "
                                  "size byte ",
                                  int{e[0]}, ", not 4"));
    }
    std::memcpy(&(*out)[i], e + 1, 4);
  }
  return absl::OkStatus();
}

}  // namespace asgd::kaldi
