#include "kaldi/compressed_matrix.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"

namespace asgd::kaldi {
namespace {

// The arithmetic below mirrors Kaldi's compressed-matrix.cc operation by
// operation (float vs double included), so that encoded bytes and decoded
// values agree with Kaldi's bit for bit.

inline float Uint16ToFloat(const CompressedHeader& h, uint16_t value) {
  return h.min_value + h.range * 1.52590218966964e-05F * value;
}

inline uint16_t FloatToUint16(const CompressedHeader& h, float value) {
  float f = (value - h.min_value) / h.range;
  if (f > 1.0) f = 1.0;
  if (f < 0.0) f = 0.0;
  return static_cast<uint16_t>(static_cast<int>(f * 65535 + 0.499));
}

inline uint8_t FloatToUint8(const CompressedHeader& h, float value) {
  float f = (value - h.min_value) / h.range;
  if (f > 1.0) f = 1.0;
  if (f < 0.0) f = 0.0;
  return static_cast<uint8_t>(static_cast<int>(f * 255 + 0.499));
}

inline float CharToFloat(float p0, float p25, float p75, float p100,
                         uint8_t value) {
  if (value <= 64) return p0 + (p25 - p0) * value * (1 / 64.0);
  if (value <= 192) return p25 + (p75 - p25) * (value - 64) * (1 / 128.0);
  return p75 + (p100 - p75) * (value - 192) * (1 / 63.0);
}

// (value - lo) / (hi - lo), or 0 where Kaldi would divide by zero (a column
// whose quantiles collapse in float; Kaldi's result is undefined there).
// Clamped to [-1, 2] (the callers clamp the byte anyway) so that no cast
// below overflows, whatever the floats.
inline float Fraction(float value, float lo, float hi) {
  const float span = hi - lo;
  if (!(span > 0)) return 0;
  return std::clamp((value - lo) / span, -1.0f, 2.0f);
}

inline uint8_t FloatToChar(float p0, float p25, float p75, float p100,
                           float value) {
  int ans;
  if (value < p25) {
    const float f = Fraction(value, p0, p25);
    ans = static_cast<int>(f * 64 + 0.5);
    ans = std::clamp(ans, 0, 64);
  } else if (value < p75) {
    const float f = Fraction(value, p25, p75);
    ans = 64 + static_cast<int>(f * 128 + 0.5);
    ans = std::clamp(ans, 64, 192);
  } else {
    const float f = Fraction(value, p75, p100);
    ans = 192 + static_cast<int>(f * 63 + 0.5);
    ans = std::clamp(ans, 192, 255);
  }
  return static_cast<uint8_t>(ans);
}

struct ColHeader {
  uint16_t p0, p25, p75, p100;
};

// Kaldi's ComputeColHeader: the 0th, 25th, 75th and 100th percentiles of a
// column, quantised and forced strictly increasing.
ColHeader ComputeColHeader(const CompressedHeader& h,
                           std::vector<float>* column) {
  std::vector<float>& s = *column;
  const int n = static_cast<int>(s.size());
  ColHeader c;
  auto up = [](uint16_t v) { return static_cast<uint16_t>(v + 1); };
  if (n >= 5) {
    const int q = n / 4;
    std::nth_element(s.begin(), s.begin() + q, s.end());
    std::nth_element(s.begin(), s.begin(), s.begin() + q);
    std::nth_element(s.begin() + q + 1, s.begin() + 3 * q, s.end());
    std::nth_element(s.begin() + 3 * q + 1, s.end() - 1, s.end());
    c.p0 = std::min<uint16_t>(FloatToUint16(h, s[0]), 65532);
    c.p25 = std::min<uint16_t>(
        std::max<uint16_t>(FloatToUint16(h, s[q]), up(c.p0)), 65533);
    c.p75 = std::min<uint16_t>(
        std::max<uint16_t>(FloatToUint16(h, s[3 * q]), up(c.p25)), 65534);
    c.p100 = std::max<uint16_t>(FloatToUint16(h, s[n - 1]), up(c.p75));
  } else {
    std::sort(s.begin(), s.end());
    c.p0 = std::min<uint16_t>(FloatToUint16(h, s[0]), 65532);
    c.p25 =
        n > 1 ? std::min<uint16_t>(
                    std::max<uint16_t>(FloatToUint16(h, s[1]), up(c.p0)), 65533)
              : up(c.p0);
    c.p75 = n > 2 ? std::min<uint16_t>(
                        std::max<uint16_t>(FloatToUint16(h, s[2]), up(c.p25)),
                        65534)
                  : up(c.p25);
    c.p100 = n > 3 ? std::max<uint16_t>(FloatToUint16(h, s[3]), up(c.p75))
                   : up(c.p75);
  }
  return c;
}

void AppendLe32(uint32_t v, std::string* out) {
  for (int i = 0; i < 4; ++i) out->push_back(static_cast<char>(v >> (8 * i)));
}
void AppendFloat(float v, std::string* out) {
  uint32_t bits;
  std::memcpy(&bits, &v, 4);
  AppendLe32(bits, out);
}
inline uint16_t Le16(const unsigned char* p) {
  return static_cast<uint16_t>(p[0] | (p[1] << 8));
}

}  // namespace

absl::string_view CompressedToken(CompressedFormat format) {
  switch (format) {
    case CompressedFormat::kOneByteWithColHeaders:
      return "CM";
    case CompressedFormat::kTwoByte:
      return "CM2";
    case CompressedFormat::kOneByte:
      return "CM3";
  }
  return "CM";
}

int64_t CompressedPayloadBytes(CompressedFormat format, int64_t rows,
                               int64_t cols) {
  switch (format) {
    case CompressedFormat::kOneByteWithColHeaders:
      return cols * 8 + rows * cols;
    case CompressedFormat::kTwoByte:
      return 2 * rows * cols;
    case CompressedFormat::kOneByte:
      return rows * cols;
  }
  return 0;
}

void DecodeCompressed(CompressedFormat format, const CompressedHeader& h,
                      const unsigned char* payload, float* out) {
  const int64_t rows = h.rows, cols = h.cols;
  switch (format) {
    case CompressedFormat::kOneByteWithColHeaders: {
      const unsigned char* bytes = payload + 8 * cols;
      for (int64_t c = 0; c < cols; ++c) {
        const unsigned char* ch = payload + 8 * c;
        const float p0 = Uint16ToFloat(h, Le16(ch)),
                    p25 = Uint16ToFloat(h, Le16(ch + 2)),
                    p75 = Uint16ToFloat(h, Le16(ch + 4)),
                    p100 = Uint16ToFloat(h, Le16(ch + 6));
        // A table of the 256 values of this column, then a gather.
        float table[256];
        for (int v = 0; v < 256; ++v) {
          table[v] = CharToFloat(p0, p25, p75, p100, static_cast<uint8_t>(v));
        }
        const unsigned char* col = bytes + c * rows;
        for (int64_t r = 0; r < rows; ++r) out[r * cols + c] = table[col[r]];
      }
      break;
    }
    case CompressedFormat::kTwoByte: {
      const float increment = h.range * (1.0 / 65535.0);
      for (int64_t i = 0; i < rows * cols; ++i) {
        out[i] = h.min_value + Le16(payload + 2 * i) * increment;
      }
      break;
    }
    case CompressedFormat::kOneByte: {
      const float increment = h.range * (1.0 / 255.0);
      for (int64_t i = 0; i < rows * cols; ++i) {
        out[i] = h.min_value + payload[i] * increment;
      }
      break;
    }
  }
}

absl::Status EncodeCompressed(const float* data, int32_t rows, int32_t cols,
                              CompressionMethod method, std::string* out) {
  const int64_t n = int64_t{rows} * cols;
  for (int64_t i = 0; i < n; ++i) {
    if (!std::isfinite(data[i])) {
      return absl::InvalidArgumentError(
          absl::StrCat("cannot compress a matrix with NaN or Inf (row ",
                       i / cols, ", column ", i % cols, ")"));
    }
  }
  CompressedFormat format = CompressedFormat::kOneByteWithColHeaders;
  switch (method) {
    case CompressionMethod::kAuto:
      format = rows > 8 ? CompressedFormat::kOneByteWithColHeaders
                        : CompressedFormat::kTwoByte;
      break;
    case CompressionMethod::kSpeechFeature:
      format = CompressedFormat::kOneByteWithColHeaders;
      break;
    case CompressionMethod::kTwoByte:
      format = CompressedFormat::kTwoByte;
      break;
    case CompressionMethod::kOneByte:
      format = CompressedFormat::kOneByte;
      break;
  }
  if (n == 0) {
    // Kaldi writes an empty matrix as "CM " and a zero header.
    out->append("CM ");
    out->append(kCompressedHeaderBytes, '\0');
    return absl::OkStatus();
  }
  CompressedHeader h;
  float min_value = data[0], max_value = data[0];
  for (int64_t i = 1; i < n; ++i) {
    min_value = std::min(min_value, data[i]);
    max_value = std::max(max_value, data[i]);
  }
  if (max_value == min_value) {
    max_value = min_value + (1.0 + std::fabs(min_value));
  }
  h.min_value = min_value;
  h.range = max_value - min_value;
  h.rows = rows;
  h.cols = cols;
  if (!(h.range > 0) || !std::isfinite(h.range)) {
    return absl::InvalidArgumentError(
        "cannot compress a matrix whose value range is not a finite float");
  }

  const absl::string_view token = CompressedToken(format);
  out->append(token.data(), token.size());
  out->push_back(' ');
  AppendFloat(h.min_value, out);
  AppendFloat(h.range, out);
  AppendLe32(static_cast<uint32_t>(rows), out);
  AppendLe32(static_cast<uint32_t>(cols), out);
  const size_t payload_at = out->size();
  out->resize(payload_at + CompressedPayloadBytes(format, rows, cols));
  unsigned char* p = reinterpret_cast<unsigned char*>(&(*out)[payload_at]);
  switch (format) {
    case CompressedFormat::kOneByteWithColHeaders: {
      unsigned char* bytes = p + 8 * int64_t{cols};
      std::vector<float> column(rows);
      for (int32_t c = 0; c < cols; ++c) {
        for (int32_t r = 0; r < rows; ++r)
          column[r] = data[int64_t{r} * cols + c];
        const ColHeader ch = ComputeColHeader(h, &column);
        unsigned char* hp = p + 8 * int64_t{c};
        const uint16_t q[4] = {ch.p0, ch.p25, ch.p75, ch.p100};
        for (int k = 0; k < 4; ++k) {
          hp[2 * k] = q[k] & 0xff;
          hp[2 * k + 1] = q[k] >> 8;
        }
        const float p0 = Uint16ToFloat(h, ch.p0),
                    p25 = Uint16ToFloat(h, ch.p25),
                    p75 = Uint16ToFloat(h, ch.p75),
                    p100 = Uint16ToFloat(h, ch.p100);
        unsigned char* col = bytes + int64_t{c} * rows;
        for (int32_t r = 0; r < rows; ++r) {
          col[r] = FloatToChar(p0, p25, p75, p100, data[int64_t{r} * cols + c]);
        }
      }
      break;
    }
    case CompressedFormat::kTwoByte:
      for (int64_t i = 0; i < n; ++i) {
        const uint16_t q = FloatToUint16(h, data[i]);
        p[2 * i] = q & 0xff;
        p[2 * i + 1] = q >> 8;
      }
      break;
    case CompressedFormat::kOneByte:
      for (int64_t i = 0; i < n; ++i) p[i] = FloatToUint8(h, data[i]);
      break;
  }
  return absl::OkStatus();
}

}  // namespace asgd::kaldi
