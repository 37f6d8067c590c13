// Test-only: a small Kaldi data directory written with the independent
// writer of test_archive.h: features in FM, CM, CM2 and CM3 over two
// archives (one utterance read through a row range), utt2spk, per-speaker
// CMVN statistics, and pdf alignments in a gzip'd binary and a text archive.
// Every utterance's expected values come from the format's formulas in
// double. Tests change the spec (one utterance made bad) before Write().
//
// Thread-safety: a plain value; not shared between threads.
#ifndef ASGD_KALDI_TEST_DATA_DIR_H_
#define ASGD_KALDI_TEST_DATA_DIR_H_

#include <cmath>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "kaldi/test_archive.h"

namespace asgd::kaldi::testing {

struct UttSpec {
  std::string key;
  std::string speaker;
  std::string archive;  // file name inside the directory
  std::string object;   // the stored feature object
  int rows = 0;         // rows of the stored object
  int cols = 0;
  std::vector<double> values;  // rows × cols, decoded (formula, double)
  int range_first = -1;        // row range read through the scp, or -1
  int range_last = -1;
  std::vector<int32_t> labels;  // one per frame read
  bool has_alignment = true;
  bool in_utt2spk = true;
  std::string scp_rx;     // replaces the scp rxfilename when set
  std::string scp_range;  // replaces the scp range ("[1:20]") when set

  int frames() const {
    return range_first < 0 ? rows : range_last - range_first + 1;
  }
  // The values read (range applied), before CMVN.
  std::vector<double> read_values() const {
    if (range_first < 0) return values;
    return std::vector<double>(values.begin() + range_first * cols,
                               values.begin() + (range_last + 1) * cols);
  }
};

class TestDataDir {
 public:
  static constexpr int kUtterances = 12;
  static constexpr int kCols = 3;
  static constexpr int kSpeakers = 3;

  explicit TestDataDir(const std::string& dir) : dir_(dir) {
    for (int i = 0; i < kUtterances; ++i) utts_.push_back(MakeUtt(i));
  }

  std::vector<UttSpec>& utts() { return utts_; }
  const std::string& dir() const { return dir_; }
  std::string alignments() const {
    return dir_ + "/pdf.1.gz," + dir_ + "/pdf.2.txt";
  }
  std::string path(const std::string& name) const { return dir_ + "/" + name; }
  // Bytes cut from the end of an archive when written.
  std::map<std::string, size_t>& cut() { return cut_; }
  // Replaces a speaker's CMVN statistics object.
  std::map<std::string, std::string>& cmvn_override() { return cmvn_override_; }

  // Writes everything; afterwards offset(key) is the object's offset.
  void Write() {
    std::map<std::string, TestArchive> archives;
    std::string scp, utt2spk;
    for (const UttSpec& u : utts_) archives[u.archive].Add(u.key, u.object);
    for (auto& [name, ark] : archives) {
      std::string bytes = ark.bytes();
      if (cut_.count(name)) bytes.resize(bytes.size() - cut_[name]);
      WriteFile(path(name), bytes);
    }
    for (const UttSpec& u : utts_) {
      offsets_[u.key] = archives[u.archive].offset(u.key);
      std::string rx = u.scp_rx;
      if (rx.empty()) {
        rx = path(u.archive) + ":" + std::to_string(offsets_[u.key]);
        if (!u.scp_range.empty()) {
          rx += u.scp_range;
        } else if (u.range_first >= 0) {
          rx += "[" + std::to_string(u.range_first) + ":" +
                std::to_string(u.range_last) + "]";
        }
      }
      scp += u.key + " " + rx + "\n";
      if (u.in_utt2spk) utt2spk += u.key + " " + u.speaker + "\n";
    }
    WriteFile(path("feats.scp"), scp);
    WriteFile(path("utt2spk"), utt2spk);

    // CMVN: per-speaker sums in double over the values read.
    std::map<std::string, std::vector<double>> stats;
    for (const UttSpec& u : utts_) {
      std::vector<double>& s = stats[u.speaker];
      s.resize(2 * (kCols + 1));
      const std::vector<double> v = u.read_values();
      for (int r = 0; r < u.frames(); ++r) {
        for (int c = 0; c < kCols; ++c) {
          s[c] += v[r * kCols + c];
          s[kCols + 1 + c] += v[r * kCols + c] * v[r * kCols + c];
        }
        s[kCols] += 1;
      }
    }
    TestArchive cmvn;
    std::string cmvn_scp;
    for (auto& [spk, s] : stats) {
      stats_[spk] = s;
      cmvn.Add(spk, cmvn_override_.count(spk) ? cmvn_override_[spk]
                                              : DmObject(2, kCols + 1, s));
    }
    WriteFile(path("cmvn.ark"), cmvn.bytes());
    for (auto& [spk, s] : stats) {
      cmvn_scp += spk + " " + path("cmvn.ark") + ":" +
                  std::to_string(cmvn.offset(spk)) + "\n";
    }
    WriteFile(path("cmvn.scp"), cmvn_scp);

    // Alignments: even utterances binary gzip'd, odd ones text.
    TestArchive binary;
    std::string text;
    for (int i = 0; i < static_cast<int>(utts_.size()); ++i) {
      const UttSpec& u = utts_[i];
      if (!u.has_alignment) continue;
      if (i % 2 == 0) {
        binary.Add(u.key, Int32VectorObject(u.labels));
      } else {
        text += u.key;
        for (int32_t l : u.labels) text += " " + std::to_string(l);
        text += "\n";
      }
    }
    std::string bin = binary.bytes();
    if (cut_.count("pdf.1.gz")) bin.resize(bin.size() - cut_["pdf.1.gz"]);
    WriteGzipFile(path("pdf.1.gz"), bin);
    WriteFile(path("pdf.2.txt"), text);
    binary_alignments_ = binary;
  }

  int64_t offset(const std::string& key) const { return offsets_.at(key); }
  int64_t binary_alignment_offset(const std::string& key) const {
    return binary_alignments_.offset(key);
  }

  // The expected features of `u` after per-speaker mean normalisation (and
  // variance normalisation when `norm_vars`).
  std::vector<double> Normalised(const UttSpec& u, bool norm_vars) const {
    const std::vector<double>& s = stats_.at(u.speaker);
    std::vector<double> v = u.read_values();
    for (int r = 0; r < u.frames(); ++r) {
      for (int c = 0; c < kCols; ++c) {
        const double mean = s[c] / s[kCols];
        double x = v[r * kCols + c] - mean;
        if (norm_vars) {
          x /= std::sqrt(s[kCols + 1 + c] / s[kCols] - mean * mean);
        }
        v[r * kCols + c] = x;
      }
    }
    return v;
  }

 private:
  // Utterance i: FM, CM3, CM or CM2 by i % 4; 6-8 rows; speaker i % 3;
  // utterance 5 read through rows [1:4]; utterance 3 carries label 9, the
  // largest (10 classes).
  static UttSpec MakeUtt(int i) {
    UttSpec u;
    u.speaker = "spk" + std::to_string(i % kSpeakers);
    u.key = u.speaker + "-utt" + (i < 10 ? "0" : "") + std::to_string(i);
    u.archive = i < 6 ? "feats.1.ark" : "feats.2.ark";
    u.rows = 6 + i % 3;
    u.cols = kCols;
    const int n = u.rows * u.cols;
    u.values.resize(n);
    switch (i % 4) {
      case 0: {
        std::vector<float> f(n);
        for (int r = 0; r < u.rows; ++r) {
          for (int c = 0; c < kCols; ++c) {
            f[r * kCols + c] = (i + 1) * 0.5f + r * 0.25f - c * 1.5f;
          }
        }
        u.object = FmObject(u.rows, kCols, f);
        u.values.assign(f.begin(), f.end());
        break;
      }
      case 1: {
        std::vector<uint8_t> q(n);
        for (int k = 0; k < n; ++k) {
          q[k] = static_cast<uint8_t>((i * 11 + k * 7) % 256);
          u.values[k] = Cm3Value(-2.0f, 5.1f, q[k]);
        }
        u.object = Cm3Object(-2.0f, 5.1f, u.rows, kCols, q);
        break;
      }
      case 2: {
        std::vector<ColumnHeader> headers;
        std::vector<uint8_t> bytes;  // column-major
        for (int c = 0; c < kCols; ++c) {
          const ColumnHeader h = {static_cast<uint16_t>(1000 * c),
                                  static_cast<uint16_t>(20000 + 1000 * c),
                                  static_cast<uint16_t>(40000 + 1000 * c),
                                  static_cast<uint16_t>(60000 + 1000 * c)};
          headers.push_back(h);
          for (int r = 0; r < u.rows; ++r) {
            const uint8_t b =
                static_cast<uint8_t>((i * 13 + r * 29 + c * 7) % 256);
            bytes.push_back(b);
            u.values[r * kCols + c] = CmByteValue(-3.0f, 6.0f, h, b);
          }
        }
        u.object = CmObject(-3.0f, 6.0f, u.rows, kCols, headers, bytes);
        break;
      }
      default: {
        std::vector<uint16_t> q(n);
        for (int k = 0; k < n; ++k) {
          q[k] = static_cast<uint16_t>((i * 1000 + k * 777) % 65536);
          u.values[k] = Uint16Value(0.0f, 10.0f, q[k]);
        }
        u.object = Cm2Object(0.0f, 10.0f, u.rows, kCols, q);
        break;
      }
    }
    if (i == 5) {
      u.range_first = 1;
      u.range_last = 4;
    }
    for (int r = 0; r < u.frames(); ++r) u.labels.push_back((r + i) % 7);
    if (i == 3) u.labels[0] = 9;
    return u;
  }

  std::string dir_;
  std::vector<UttSpec> utts_;
  std::map<std::string, size_t> cut_;
  std::map<std::string, std::string> cmvn_override_;
  std::map<std::string, int64_t> offsets_;
  std::map<std::string, std::vector<double>> stats_;
  TestArchive binary_alignments_;
};

}  // namespace asgd::kaldi::testing

#endif  // ASGD_KALDI_TEST_DATA_DIR_H_
