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
#include "kaldi/object_parser.h"

#if !defined(ABSL_IS_LITTLE_ENDIAN)
#error "the Kaldi readers assume a little-endian host"
#endif

namespace asgd::kaldi {
namespace {

using object_parser::IsSpace;
using object_parser::Parser;
using object_parser::Printable;

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
