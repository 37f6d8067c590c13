// libFuzzer target: ChunkAssembler over a layout and a chunk sequence that
// both come from the input.
//
// Encoding (ByteReader, front to back; missing bytes read as 0):
//   u8 tensors (1 + v % 4); per tensor: u8 dims (1 + v % 2), u8 per dim
//   (1 + v % 24); u8 servers (1 + v % 4), u8 shards (1 + v % 4), u8 server
//   (v % servers), u8 max_elements (1 + v % 64), u8 flags (bit 0:
//   check_finite). Then operations until the input ends:
//   u8 op: op % 8 == 7 -> Finish(u16 declared) and stop; otherwise Add():
//     op bits 3-4: element encoding (0, 2: float32; 1: bfloat16; 3: an
//       unknown dtype 2 + u8);
//     op bit 5: the data arrives in two pieces cut at u16 % (length + 1);
//       op bit 6: with an empty piece between them;
//     u8 tensor: v % (tensors + 1) == tensors -> a name of u8 length and
//       that many bytes, else the name of tensor v % (tensors + 1);
//     u8 offset kind: bit 0 -> u64 offset, else u16 offset;
//     u16 byte length, then that many bytes of data.
//
// The destination holds exactly range.size() floats on the heap, so ASan
// catches any write outside it. Properties, against a reference of where
// each accepted chunk must land: accepted chunks lie inside the range and
// one tensor, respect the limit, overlap nothing, are finite when checked,
// were sent in a known encoding;
// after an error every call fails; Finish() succeeds only when the range is
// covered exactly once with the declared count, and then the destination
// holds exactly the values sent (bfloat16 widened), however they were cut.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "common/chunking.h"
#include "common/model_layout.h"
#include "common/wire_codec.h"
#include "fuzz/fuzz_common.h"

namespace asgd {
namespace fuzz {
namespace {

void Run(const uint8_t* data, size_t size) {
  ByteReader in(data, size);
  const int num_tensors = 1 + in.U8() % 4;
  std::vector<TensorSpec> tensors;
  for (int t = 0; t < num_tensors; ++t) {
    TensorSpec spec;
    spec.name = "t" + std::to_string(t);
    const int dims = 1 + in.U8() % 2;
    for (int d = 0; d < dims; ++d) spec.shape.push_back(1 + in.U8() % 24);
    tensors.push_back(spec);
  }
  const int num_servers = 1 + in.U8() % 4;
  const int num_shards = 1 + in.U8() % 4;
  const int server = in.U8() % num_servers;
  const int64_t max_elements = 1 + in.U8() % 64;
  const bool check_finite = (in.U8() & 1) != 0;

  auto created = ModelLayout::Create(tensors, num_servers, num_shards);
  FUZZ_CHECK(created.ok());
  const ModelLayout layout = *std::move(created);
  const FlatRange range = layout.ServerRange(server);
  FUZZ_CHECK(range.begin >= 0 && range.begin <= range.end &&
             range.end <= layout.total_size());

  // Exactly range.size() floats: any write past them is a heap overflow.
  std::unique_ptr<float[]> dst(new float[range.size()]());
  ChunkAssembler assembler(&layout, range, max_elements, dst.get(),
                           check_finite);
  std::vector<float> expected(range.size(), 0.0f);
  std::vector<int> covered(range.size(), 0);
  int64_t accepted = 0;
  bool failed = false;

  while (!in.empty()) {
    const uint8_t op = in.U8();
    if (op % 8 == 7) {
      const uint16_t declared = in.U16();
      const absl::Status s = assembler.Finish(declared);
      FUZZ_CHECK(s.ok() || s.code() == absl::StatusCode::kInvalidArgument);
      if (failed) {
        FUZZ_CHECK(!s.ok());
        break;
      }
      if (s.ok()) {
        FUZZ_CHECK(declared == accepted);
        FUZZ_CHECK(assembler.error() == ChunkError::kNone);
        for (int64_t i = 0; i < range.size(); ++i) FUZZ_CHECK(covered[i] == 1);
        FUZZ_CHECK(range.size() == 0 ||  // memcmp wants non-null pointers
                   std::memcmp(dst.get(), expected.data(),
                               range.size() * sizeof(float)) == 0);
      } else {
        FUZZ_CHECK(assembler.error() == ChunkError::kBadSequence);
      }
      break;
    }
    int dtype = (op >> 3) & 3;
    if (dtype == 2) dtype = 0;
    if (dtype == 3) dtype = 2 + in.U8();
    const bool split = (op >> 5) & 1;
    const bool empty_piece = (op >> 6) & 1;
    const uint16_t cut_at = split ? in.U16() : 0;
    std::string name;
    const int pick = in.U8() % (num_tensors + 1);
    if (pick == num_tensors) {
      name = in.Bytes(in.U8());
    } else {
      name = tensors[pick].name;
    }
    const uint64_t offset = (in.U8() & 1) ? in.U64() : in.U16();
    const std::string bytes = in.Bytes(in.U16());

    const absl::string_view all(bytes);
    std::vector<absl::string_view> pieces = {all};
    if (split) {
      const size_t cut = cut_at % (bytes.size() + 1);
      pieces = {all.substr(0, cut), all.substr(cut)};
      if (empty_piece) pieces.insert(pieces.begin() + 1, absl::string_view());
    }
    const absl::Status s = assembler.Add(name, offset, pieces, dtype);
    FUZZ_CHECK(s.ok() || s.code() == absl::StatusCode::kInvalidArgument);
    if (failed) {
      FUZZ_CHECK(!s.ok());
      continue;
    }
    if (!s.ok()) {
      FUZZ_CHECK(assembler.error() != ChunkError::kNone);
      FUZZ_CHECK(check_finite || assembler.error() != ChunkError::kNonFinite);
      failed = true;
      continue;
    }
    FUZZ_CHECK(assembler.error() == ChunkError::kNone);
    FUZZ_CHECK(IsKnownWireDtype(dtype));
    const int t = layout.FindTensor(name);
    FUZZ_CHECK(t >= 0);
    const int width = WireBytes(static_cast<WireDtype>(dtype));
    const int64_t count = static_cast<int64_t>(bytes.size() / width);
    FUZZ_CHECK(count >= 1 && bytes.size() % width == 0);
    FUZZ_CHECK(count <= max_elements);
    FUZZ_CHECK(offset < static_cast<uint64_t>(layout.tensor_size(t)));
    FUZZ_CHECK(static_cast<int64_t>(offset) + count <= layout.tensor_size(t));
    const int64_t local =
        layout.tensor_offset(t) + static_cast<int64_t>(offset) - range.begin;
    FUZZ_CHECK(local >= 0 && local + count <= range.size());
    for (int64_t i = 0; i < count; ++i) {
      if (width == 4) {
        std::memcpy(&expected[local + i], bytes.data() + 4 * i, 4);
      } else {
        uint16_t b;
        std::memcpy(&b, bytes.data() + 2 * i, 2);
        expected[local + i] = Bf16ToFloat(b);
      }
    }
    for (int64_t i = 0; i < count; ++i) {
      FUZZ_CHECK(!check_finite || std::isfinite(expected[local + i]));
      FUZZ_CHECK(++covered[local + i] == 1);
    }
    ++accepted;
    FUZZ_CHECK(assembler.chunks_received() == accepted);
  }
}

}  // namespace
}  // namespace fuzz
}  // namespace asgd

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  asgd::fuzz::Run(data, size);
  return 0;
}
