// libFuzzer target: the compressed gradient decoders (compression/grad_codec.h)
// and the fused decode + apply (step/compressed_apply.h).
//
// Encoding (ByteReader, front to back; missing bytes read as 0):
//   u8 flags: bit 0: encode mode (else parse mode); bits 1-2: optimizer (0:
//     SGD, 1: momentum, 2: Nesterov + weight decay, 3: SGD + DC-ASGD);
//   u16 max_elements (1 + v), u16 max_group_size (1 + v), u16 begin, u16 end
//   (a sub-range, reduced modulo count + 1).
//   Parse mode: the rest is a compressed chunk, given to
//     ParseCompressedChunk as is.
//   Encode mode: u8 codec (bit 0: top-k), u16 group size / k, u16 first
//     group, then float32 values (gradient, then residual) until the input
//     ends; the encoder's output must parse.
//
// Properties: a parse is OK or InvalidArgument; a refused chunk leaves the
// output buffers exactly as they were (DecodeCompressedChunk and
// ApplyCompressedBytes); an accepted one respects the limits, decodes to
// finite values (one-bit: each one of its group's two levels; top-k: exactly
// k entries at strictly increasing indices inside the chunk), a sub-range
// decodes to the same values as the full decode, and the fused apply equals
// decode + Optimizer::Apply bit for bit. Encoders: the output parses, and
// residual_after == a - decoded exactly. Buffers hold exactly `count` floats on
// the heap, so ASan catches any access outside them.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "compression/grad_codec.h"
#include "fuzz/fuzz_common.h"
#include "step/compressed_apply.h"
#include "step/optimizer.h"

namespace asgd {
namespace fuzz {
namespace {

constexpr float kSentinel = 777.0f;

Optimizer MakeOptimizer(int kind) {
  OptimizerOptions o;
  o.learning_rate = 0.1f;
  if (kind == 1) o.momentum = 0.9f;
  if (kind == 2) {
    o.momentum = 0.5f;
    o.nesterov = true;
    o.weight_decay = 0.01f;
  }
  if (kind == 3) o.dc_lambda = 0.5f;
  auto opt = Optimizer::Create(o);
  FUZZ_CHECK(opt.ok());
  return *opt;
}

std::unique_ptr<float[]> Filled(int64_t n, float value) {
  std::unique_ptr<float[]> p(new float[n]);
  for (int64_t i = 0; i < n; ++i) p[i] = value;
  return p;
}

void CheckAccepted(const CompressedChunk& c, const CodecLimits& limits,
                   const Optimizer& opt, uint16_t begin_in, uint16_t end_in) {
  const int64_t n = c.count;
  FUZZ_CHECK(n >= 1 && n <= limits.max_elements);
  std::unique_ptr<float[]> full(new float[n]);
  DecodeCompressed(c, 0, n, full.get());
  int64_t nonzeros = 0;
  for (int64_t i = 0; i < n; ++i) {
    FUZZ_CHECK(std::isfinite(full[i]));
    nonzeros += full[i] != 0.0f;
    if (c.encoding == GradEncoding::kOneBit) {
      FUZZ_CHECK(c.group_size <= limits.max_group_size);
      const int64_t g = OneBitGroupOf(c, i);
      FUZZ_CHECK(g >= 0 && g < c.num_groups);
      float neg, pos;
      std::memcpy(&neg, c.levels + 8 * g, 4);
      std::memcpy(&pos, c.levels + 8 * g + 4, 4);
      FUZZ_CHECK(full[i] == neg || full[i] == pos);
    }
  }
  if (c.encoding == GradEncoding::kTopK) {
    FUZZ_CHECK(nonzeros <= c.k);
    // Exactly k entries, strictly increasing, inside the chunk, and each one
    // decoded in place.
    TopKReader reader(c);
    int64_t index, previous = -1, entries = 0;
    float value;
    while (reader.Next(&index, &value)) {
      FUZZ_CHECK(index > previous && index < n);
      FUZZ_CHECK(std::memcmp(&full[index], &value, 4) == 0);
      previous = index;
      ++entries;
    }
    FUZZ_CHECK(entries == c.k);
  }

  int64_t begin = begin_in % (n + 1);
  int64_t end = end_in % (n + 1);
  if (begin > end) std::swap(begin, end);
  const int64_t m = end - begin;
  if (m > 0) {
    std::unique_ptr<float[]> part(new float[m]);
    DecodeCompressed(c, begin, end, part.get());
    FUZZ_CHECK(std::memcmp(part.get(), full.get() + begin, m * 4) == 0);
  }

  // Fused apply over [begin, end) vs decode + Optimizer::Apply.
  if (m > 0) {
    std::unique_ptr<float[]> w1(new float[m]), w2(new float[m]);
    std::unique_ptr<float[]> v1(new float[m]), v2(new float[m]);
    std::unique_ptr<float[]> backup(new float[m]);
    for (int64_t i = 0; i < m; ++i) {
      w1[i] = w2[i] = 0.01f * static_cast<float>(i % 97) - 0.3f;
      v1[i] = v2[i] = 0.001f * static_cast<float>(i % 13);
      backup[i] = w1[i] + 0.02f;
    }
    UpdateContext ctx{0.75f, 3, opt.needs_backup() ? backup.get() : nullptr};
    ApplyCompressed(opt, c, begin, end, w1.get(),
                    opt.has_state() ? v1.get() : nullptr, ctx);
    opt.Apply(w2.get(), opt.has_state() ? v2.get() : nullptr,
              full.get() + begin, m, ctx);
    FUZZ_CHECK(std::memcmp(w1.get(), w2.get(), m * 4) == 0);
    FUZZ_CHECK(std::memcmp(v1.get(), v2.get(), m * 4) == 0);
  }
}

void RunParse(ByteReader& in, const uint8_t* rest, size_t rest_size,
              const CodecLimits& limits, const Optimizer& opt, uint16_t begin,
              uint16_t end) {
  (void)in;
  const absl::string_view data(reinterpret_cast<const char*>(rest), rest_size);
  absl::StatusOr<CompressedChunk> parsed = ParseCompressedChunk(data, limits);
  if (parsed.ok()) {
    CheckAccepted(*parsed, limits, opt, begin, end);
    return;
  }
  FUZZ_CHECK(parsed.status().code() == absl::StatusCode::kInvalidArgument);
  FUZZ_CHECK(!parsed.status().message().empty());
  // Nothing written on error, whatever size the caller expected.
  const int64_t n = 1 + begin % 64;
  std::unique_ptr<float[]> out = Filled(n, kSentinel);
  const absl::Status s =
      DecodeCompressedChunk(data, limits, absl::MakeSpan(out.get(), n));
  FUZZ_CHECK(s.code() == absl::StatusCode::kInvalidArgument);
  std::unique_ptr<float[]> w = Filled(n, kSentinel), v = Filled(n, kSentinel);
  const absl::Status a =
      ApplyCompressedBytes(opt, data, limits, w.get(), v.get(), n, {});
  FUZZ_CHECK(a.code() == absl::StatusCode::kInvalidArgument);
  for (int64_t i = 0; i < n; ++i) {
    FUZZ_CHECK(out[i] == kSentinel && w[i] == kSentinel && v[i] == kSentinel);
  }
}

void RunEncode(ByteReader& in, const CodecLimits& limits, const Optimizer& opt,
               uint16_t begin, uint16_t end) {
  const bool top_k = (in.U8() & 1) != 0;
  const uint16_t param = in.U16();
  const uint16_t first = in.U16();
  std::vector<float> values;
  while (!in.empty()) {
    const std::string b = in.Bytes(4);
    float f = 0;
    std::memcpy(&f, b.data(), b.size());
    values.push_back(f);
  }
  const int64_t n = static_cast<int64_t>(values.size() / 2);
  if (n < 1) return;
  std::vector<float> grad(values.begin(), values.begin() + n);
  std::vector<float> residual(values.begin() + n, values.begin() + 2 * n);
  const std::vector<float> residual_before = residual;
  std::string out = "untouched";
  absl::Status s;
  if (top_k) {
    s = EncodeTopK(grad, param % (n + 1), absl::MakeSpan(residual), &out);
  } else {
    const int64_t g = 1 + param;
    s = EncodeOneBit(grad, g, 1 + first % std::min<int64_t>(g, n),
                     absl::MakeSpan(residual), &out);
  }
  bool finite = true;
  for (int64_t i = 0; i < n; ++i) {
    finite = finite && std::isfinite(grad[i] + residual_before[i]);
  }
  if (!s.ok()) {
    FUZZ_CHECK(s.code() == absl::StatusCode::kInvalidArgument);
    FUZZ_CHECK(!finite);
    FUZZ_CHECK(out == "untouched");
    FUZZ_CHECK(std::memcmp(residual.data(), residual_before.data(),
                           n * sizeof(float)) == 0);
    return;
  }
  FUZZ_CHECK(finite);
  CodecLimits loose;
  loose.max_elements = n;
  loose.max_group_size = kGradCodecMaxGroupSize;
  absl::StatusOr<CompressedChunk> parsed = ParseCompressedChunk(out, loose);
  FUZZ_CHECK(parsed.ok());
  FUZZ_CHECK(parsed->count == n);
  std::vector<float> decoded(n);
  DecodeCompressed(*parsed, 0, n, decoded.data());
  for (int64_t i = 0; i < n; ++i) {
    const float a = grad[i] + residual_before[i];
    const float lost = a - decoded[i];
    FUZZ_CHECK(std::memcmp(&residual[i], &lost, 4) == 0);
  }
  CheckAccepted(*parsed, loose, opt, begin, end);
  (void)limits;
}

void Run(const uint8_t* data, size_t size) {
  ByteReader in(data, size);
  const uint8_t flags = in.U8();
  CodecLimits limits;
  limits.max_elements = 1 + in.U16();
  limits.max_group_size = 1 + in.U16();
  const uint16_t begin = in.U16();
  const uint16_t end = in.U16();
  const Optimizer opt = MakeOptimizer((flags >> 1) & 3);
  if (flags & 1) {
    RunEncode(in, limits, opt, begin, end);
  } else {
    const size_t header = 9;  // the bytes read above
    RunParse(in, data + std::min(size, header), size - std::min(size, header),
             limits, opt, begin, end);
  }
}

}  // namespace
}  // namespace fuzz
}  // namespace asgd

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  asgd::fuzz::Run(data, size);
  return 0;
}
