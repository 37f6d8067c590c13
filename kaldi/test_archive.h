// Test-only: an independent writer of Kaldi objects and archives, written
// byte by byte from the published format (Kaldi's WriteBasicType, Matrix,
// Vector and CompressedMatrix Write), sharing no code with the library it
// checks. Compressed matrices are laid out from explicit header values and
// quantised bytes, and their expected values computed in double from the
// decode formula.
//
// Thread-safety: the functions are reentrant; objects are plain values.
#ifndef ASGD_KALDI_TEST_ARCHIVE_H_
#define ASGD_KALDI_TEST_ARCHIVE_H_

#include <stdlib.h>
#include <zlib.h>

#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace asgd::kaldi::testing {

// Little-endian bytes, one at a time.
class Bytes {
 public:
  Bytes& Raw(const std::string& s) {
    s_ += s;
    return *this;
  }
  Bytes& U8(uint8_t v) {
    s_.push_back(static_cast<char>(v));
    return *this;
  }
  Bytes& U16(uint16_t v) { return U8(v & 0xff).U8(v >> 8); }
  Bytes& U32(uint32_t v) {
    for (int i = 0; i < 4; ++i) U8(static_cast<uint8_t>(v >> (8 * i)));
    return *this;
  }
  Bytes& U64(uint64_t v) {
    for (int i = 0; i < 8; ++i) U8(static_cast<uint8_t>(v >> (8 * i)));
    return *this;
  }
  Bytes& I32(int32_t v) { return U32(static_cast<uint32_t>(v)); }
  Bytes& F32(float v) {
    uint32_t bits;
    std::memcpy(&bits, &v, 4);
    return U32(bits);
  }
  Bytes& F64(double v) {
    uint64_t bits;
    std::memcpy(&bits, &v, 8);
    return U64(bits);
  }
  // Kaldi's WriteBasicType<int32>: size byte 4, then the value.
  Bytes& KaldiInt32(int32_t v) { return U8(4).I32(v); }
  const std::string& str() const { return s_; }

 private:
  std::string s_;
};

inline std::string BinaryHeader() { return std::string("\0B", 2); }

inline std::string FmObject(int32_t rows, int32_t cols,
                            const std::vector<float>& data) {
  Bytes b;
  b.Raw(BinaryHeader()).Raw("FM ").KaldiInt32(rows).KaldiInt32(cols);
  for (float v : data) b.F32(v);
  return b.str();
}

inline std::string DmObject(int32_t rows, int32_t cols,
                            const std::vector<double>& data) {
  Bytes b;
  b.Raw(BinaryHeader()).Raw("DM ").KaldiInt32(rows).KaldiInt32(cols);
  for (double v : data) b.F64(v);
  return b.str();
}

inline std::string FvObject(const std::vector<float>& v) {
  Bytes b;
  b.Raw(BinaryHeader()).Raw("FV ").KaldiInt32(static_cast<int32_t>(v.size()));
  for (float x : v) b.F32(x);
  return b.str();
}

inline std::string DvObject(const std::vector<double>& v) {
  Bytes b;
  b.Raw(BinaryHeader()).Raw("DV ").KaldiInt32(static_cast<int32_t>(v.size()));
  for (double x : v) b.F64(x);
  return b.str();
}

inline std::string Int32VectorObject(const std::vector<int32_t>& v) {
  Bytes b;
  b.Raw(BinaryHeader()).KaldiInt32(static_cast<int32_t>(v.size()));
  for (int32_t x : v) b.KaldiInt32(x);
  return b.str();
}

// A binary Posterior (hmm/posterior.cc's WritePosterior): frames, then per
// frame the pair count and (int32 id, weight) pairs; weights as float
// (size byte 4), or as double (size byte 8) with `doubles`.
inline std::string PosteriorObject(
    const std::vector<std::vector<std::pair<int32_t, double>>>& post,
    bool doubles = false) {
  Bytes b;
  b.Raw(BinaryHeader()).KaldiInt32(static_cast<int32_t>(post.size()));
  for (const auto& frame : post) {
    b.KaldiInt32(static_cast<int32_t>(frame.size()));
    for (const auto& [id, weight] : frame) {
      b.KaldiInt32(id);
      if (doubles) {
        b.U8(8).F64(weight);
      } else {
        b.U8(4).F32(static_cast<float>(weight));
      }
    }
  }
  return b.str();
}

struct ColumnHeader {
  uint16_t p0, p25, p75, p100;
};

// "CM ": global header, column headers, then bytes column by column
// (`bytes` is column-major: all rows of column 0 first).
inline std::string CmObject(float min, float range, int32_t rows, int32_t cols,
                            const std::vector<ColumnHeader>& headers,
                            const std::vector<uint8_t>& bytes) {
  Bytes b;
  b.Raw(BinaryHeader()).Raw("CM ").F32(min).F32(range).I32(rows).I32(cols);
  for (const ColumnHeader& h : headers) {
    b.U16(h.p0).U16(h.p25).U16(h.p75).U16(h.p100);
  }
  for (uint8_t v : bytes) b.U8(v);
  return b.str();
}

// "CM2 ": uint16 values row-major.
inline std::string Cm2Object(float min, float range, int32_t rows, int32_t cols,
                             const std::vector<uint16_t>& q) {
  Bytes b;
  b.Raw(BinaryHeader()).Raw("CM2 ").F32(min).F32(range).I32(rows).I32(cols);
  for (uint16_t v : q) b.U16(v);
  return b.str();
}

// "CM3 ": uint8 values row-major.
inline std::string Cm3Object(float min, float range, int32_t rows, int32_t cols,
                             const std::vector<uint8_t>& q) {
  Bytes b;
  b.Raw(BinaryHeader()).Raw("CM3 ").F32(min).F32(range).I32(rows).I32(cols);
  for (uint8_t v : q) b.U8(v);
  return b.str();
}

// The decode formulas of the format, in double.
inline double Uint16Value(float min, float range, uint16_t u) {
  return double{min} + double{range} * u / 65535.0;
}
inline double CmByteValue(float min, float range, const ColumnHeader& h,
                          uint8_t v) {
  const double p0 = Uint16Value(min, range, h.p0);
  const double p25 = Uint16Value(min, range, h.p25);
  const double p75 = Uint16Value(min, range, h.p75);
  const double p100 = Uint16Value(min, range, h.p100);
  if (v <= 64) return p0 + (p25 - p0) * v / 64.0;
  if (v <= 192) return p25 + (p75 - p25) * (v - 64) / 128.0;
  return p75 + (p100 - p75) * (v - 192) / 63.0;
}
inline double Cm3Value(float min, float range, uint8_t q) {
  return double{min} + double{range} * q / 255.0;
}

// An archive: `key SPACE object` entries, remembering each object's offset.
class TestArchive {
 public:
  void Add(const std::string& key, const std::string& object) {
    bytes_ += key;
    bytes_ += ' ';
    offsets_[key] = static_cast<int64_t>(bytes_.size());
    bytes_ += object;
  }
  // Raw bytes (text entries, garbage).
  void AddRaw(const std::string& raw) { bytes_ += raw; }
  const std::string& bytes() const { return bytes_; }
  int64_t offset(const std::string& key) const { return offsets_.at(key); }

 private:
  std::string bytes_;
  std::map<std::string, int64_t> offsets_;
};

inline void WriteFile(const std::string& path, const std::string& data) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(data.data(), static_cast<std::streamsize>(data.size()));
}

inline std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// `data` gzip'd with zlib (what `gzip -c` and Kaldi's `| gzip -c >` make).
inline bool WriteGzipFile(const std::string& path, const std::string& data) {
  gzFile f = gzopen(path.c_str(), "wb");
  if (f == nullptr) return false;
  const int n = gzwrite(f, data.data(), static_cast<unsigned>(data.size()));
  return gzclose(f) == Z_OK && n == static_cast<int>(data.size());
}

// A fresh directory under `base` (the test's TempDir).
inline std::string MakeTempDir(const std::string& base,
                               const std::string& name) {
  std::string pattern = base + "/" + name + ".XXXXXX";
  if (mkdtemp(pattern.data()) == nullptr) return "";
  return pattern;
}

}  // namespace asgd::kaldi::testing

#endif  // ASGD_KALDI_TEST_ARCHIVE_H_
