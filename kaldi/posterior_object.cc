// ReadPosteriorObject (declared in object_reader.h): Kaldi's Posterior in
// binary and text form, as hmm/posterior.cc's WritePosterior writes it.
#include <cstdint>
#include <cstring>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "kaldi/bad_data.h"
#include "kaldi/object_parser.h"
#include "kaldi/object_reader.h"

namespace asgd::kaldi {
namespace {

using object_parser::Parser;
using object_parser::Printable;

// The smallest binary pair: \x04 int32, \x04 float.
constexpr int64_t kMinPairBytes = 10;

absl::Status ReadBinaryPosterior(Parser& p, Posterior* out) {
  int32_t frames;
  absl::Status s = p.Int32(&frames, "the posterior's frame count");
  if (!s.ok()) return s;
  if (frames < 0) {
    return p.Error(BadDataReason::kMalformedObject,
                   absl::StrCat("posterior of ", frames, " frames"));
  }
  s = p.CheckCount(frames, "the posterior's frames");
  if (!s.ok()) return s;
  // At least a count (5 bytes) per frame: a claim past the data fails here.
  s = p.CheckRemaining(int64_t{frames} * 5, "the posterior's frames");
  if (!s.ok()) return s;
  int64_t pairs = 0;
  for (int32_t f = 0; f < frames; ++f) {
    int32_t n;
    s = p.Int32(&n, "a posterior frame's pair count");
    if (!s.ok()) return s;
    if (n < 0) {
      return p.Error(BadDataReason::kMalformedObject,
                     absl::StrCat("frame ", f, " of the posterior has ", n,
                                  " pairs"));
    }
    pairs += n;
    s = p.CheckCount(pairs, "the posterior's pairs");
    if (!s.ok()) return s;
    s = p.CheckRemaining(int64_t{n} * kMinPairBytes, "a posterior frame");
    if (!s.ok()) return s;
    std::vector<std::pair<int32_t, float>>& frame = out->emplace_back();
    for (int32_t i = 0; i < n; ++i) {
      int32_t id;
      s = p.Int32(&id, "a posterior id");
      if (!s.ok()) return s;
      // Kaldi's ReadBasicType<float>: a size byte, 4 (float) or 8 (double).
      unsigned char size;
      s = p.Bytes(&size, 1, "a posterior weight");
      if (!s.ok()) return s;
      float weight;
      if (size == 4) {
        s = p.Bytes(&weight, 4, "a posterior weight");
      } else if (size == 8) {
        double d;
        s = p.Bytes(&d, 8, "a posterior weight");
        weight = static_cast<float>(d);
      } else {
        return p.Error(BadDataReason::kMalformedObject,
                       absl::StrCat("frame ", f, " of the posterior: weight "
                                    "size byte ", int{size}, ", not 4 or 8"));
      }
      if (!s.ok()) return s;
      frame.emplace_back(id, weight);
    }
  }
  return absl::OkStatus();
}

// "[ id w id w ] [ ] ..." up to the end of the line (or of the data).
absl::Status ReadTextPosterior(Parser& p, Posterior* out) {
  InputStream* in = p.in();
  int64_t pairs = 0, line_bytes = 0;
  bool in_frame = false;
  while (true) {
    const int c = p.SkipBlanks(/*newlines=*/false);
    if (c < 0 || c == '\n') {
      if (in_frame) return p.Truncated("a text posterior frame");
      if (c < 0 && !in->io_status().ok()) return in->io_status();
      if (c == '\n') in->Get();
      return absl::OkStatus();
    }
    if (c == '[' || c == ']') {
      in->Get();
      ++line_bytes;
      if ((c == '[') == in_frame) {
        return p.Error(
            BadDataReason::kMalformedObject,
            absl::StrCat("a text posterior has \"", std::string(1, c),
                         "\" where ", in_frame ? "an id" : "\"[\"",
                         " belongs"));
      }
      in_frame = c == '[';
      if (in_frame) {
        auto frames = static_cast<int64_t>(out->size()) + 1;
        absl::Status s = p.CheckCount(frames, "the posterior's frames");
        if (!s.ok()) return s;
        out->emplace_back();
      }
      continue;
    }
    auto id_token = p.TextToken();
    if (!id_token.ok()) return id_token.status();
    int32_t id;
    if (!in_frame || id_token->empty() || !absl::SimpleAtoi(*id_token, &id)) {
      if (id_token->empty()) id_token = std::string(1, char(in->Get()));
      return p.Error(BadDataReason::kMalformedObject,
                     absl::StrCat("\"", Printable(*id_token), "\" where ",
                                  in_frame ? "an int32 id" : "\"[\"",
                                  " belongs in a text posterior"));
    }
    p.SkipBlanks(/*newlines=*/false);
    auto weight_token = p.TextToken();
    if (!weight_token.ok()) return weight_token.status();
    float weight;
    absl::Status s = p.TextNumber(*weight_token, &weight);
    if (!s.ok()) return s;
    line_bytes += static_cast<int64_t>(id_token->size() +
                                       weight_token->size()) + 2;
    if (line_bytes > p.limits().max_text_line_bytes) {
      return p.Error(BadDataReason::kTooLarge,
                     "the text posterior's line is too long");
    }
    s = p.CheckCount(++pairs, "the posterior's pairs");
    if (!s.ok()) return s;
    out->back().emplace_back(id, weight);
  }
}

}  // namespace

absl::Status ReadPosteriorObject(InputStream* in, const ReadLimits& limits,
                                 absl::string_view key, Posterior* out,
                                 ObjectFormat* format) {
  Parser p(in, limits, key);
  out->clear();
  auto binary = p.BinaryHeader();
  if (!binary.ok()) return binary.status();
  if (!*binary) {
    if (format != nullptr) *format = ObjectFormat::kTextPosterior;
    return ReadTextPosterior(p, out);
  }
  if (in->Peek() != 4) {
    auto token = p.Token();
    if (!token.ok()) return token.status();
    return p.Error(BadDataReason::kUnknownToken,
                   absl::StrCat("found \"", Printable(*token),
                                "\" where a posterior belongs"));
  }
  if (format != nullptr) *format = ObjectFormat::kPosterior;
  return ReadBinaryPosterior(p, out);
}

}  // namespace asgd::kaldi
