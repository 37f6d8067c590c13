// Shared by the fuzz targets and the seed generator (make_seeds.cc): the
// small model the push fuzzer runs against, the input encodings, and a CHECK
// that turns a violated property into a crash libFuzzer reports.
//
// Push stream encodings (push_fuzzer.cc). Byte 0: bit 0 selects the server of
// the 2-server pool, bit 1 the encoding of the rest, bit 2 a pool whose
// servers keep kFuzzAdmmSlots ADMM slots.
//  * Raw (bit 1 clear): records, each a little-endian uint16 length L and L
//    bytes of one serialized asgd.v1.PushChunk (the last record takes what
//    remains). Exercises the wire parsing exactly as gRPC would.
//  * Structured (bit 1 set): operations read with ByteReader that build the
//    messages field by field, so that mutations change one field without
//    breaking the nested protobuf lengths (see PushOp below).
// A record that does not parse ends the stream, as a broken gRPC stream would.
//
// Chunk sequence encoding (chunk_fuzzer.cc) is read with ByteReader; see
// that file.
#ifndef ASGD_FUZZ_FUZZ_COMMON_H_
#define ASGD_FUZZ_FUZZ_COMMON_H_

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "common/model_layout.h"
#include "server/param_store.h"

// Fuzz properties are internal invariants of the code under test: abort (a
// crash with a message and the input saved) when one is violated.
#define FUZZ_CHECK(cond)                                                 \
  do {                                                                   \
    if (!(cond)) {                                                       \
      std::fprintf(stderr, "FUZZ_CHECK failed at %s:%d: %s\n", __FILE__, \
                   __LINE__, #cond);                                     \
      std::abort();                                                      \
    }                                                                    \
  } while (0)

namespace asgd {
namespace fuzz {

// 6 inputs, 5 hidden units, 3 classes: 53 floats. With 2 servers x 2 shards
// (16-element alignment) server 0 holds [0, 16) of layer0/weight and server 1
// [16, 53): the rest of layer0/weight and three whole tensors.
inline std::vector<TensorSpec> FuzzTensors() {
  return {{"layer0/weight", {5, 6}},
          {"layer0/bias", {5}},
          {"layer1/weight", {3, 5}},
          {"layer1/bias", {3}}};
}
inline constexpr int kNumServers = 2;
inline constexpr int kNumShards = 2;
// The ADMM slots of the pool byte 0's kAdmmPoolBit selects.
inline constexpr int kFuzzAdmmSlots = 2;
inline constexpr int64_t kMaxChunkElements = 8;

inline ParamStoreOptions FuzzStoreOptions(int server_index) {
  ParamStoreOptions o;
  o.tensors = FuzzTensors();
  o.num_servers = kNumServers;
  o.server_index = server_index;
  o.num_shards = kNumShards;
  o.max_chunk_elements = kMaxChunkElements;
  o.queue_capacity = 4;
  o.max_change = 1.0;  // asgd_server's default
  return o;
}

// The same server in a pool that keeps ADMM slots.
inline ParamStoreOptions FuzzAdmmStoreOptions(int server_index) {
  ParamStoreOptions o = FuzzStoreOptions(server_index);
  o.admm_slots = kFuzzAdmmSlots;
  return o;
}

// The initial weights of the whole fuzz model: small, distinct values.
inline std::vector<float> FuzzInitialModel() {
  std::vector<float> w(53);
  for (size_t i = 0; i < w.size(); ++i) w[i] = 0.01f * static_cast<float>(i);
  return w;
}

// Push stream records (see the file comment).
inline std::vector<std::string> SplitRecords(const uint8_t* data, size_t size) {
  std::vector<std::string> records;
  size_t pos = 0;
  while (pos + 2 <= size) {
    const size_t len = data[pos] | (size_t{data[pos + 1]} << 8);
    pos += 2;
    const size_t take = len < size - pos ? len : size - pos;
    records.emplace_back(reinterpret_cast<const char*>(data + pos), take);
    pos += take;
  }
  return records;
}

inline void AppendRecord(const std::string& bytes, std::string* out) {
  out->push_back(static_cast<char>(bytes.size() & 0xff));
  out->push_back(static_cast<char>((bytes.size() >> 8) & 0xff));
  out->append(bytes);
}

// Structured push encoding: u8 op, op % kNumPushOps selects one of these.
//  kOpHeader: u8 flags (bit 0: u64 version, else u8; bit 1: ASSIGN; bit 2: the
//             message's own version is a separate u8; bit 3: ADD, unless
//             ASSIGN; bit 4: ADMM, unless ASSIGN or ADD), version, u8
//             worker, u8 num_minibatches (255: then a u64, truncated to
//             uint32), and for ADMM a u8 slot (taken % (2 * kFuzzAdmmSlots):
//             half of them out of range).
//  kOpChunk:  u8 tensor (v % (tensors + 1) == tensors: a name of u8 length
//             and that many bytes; else the tensor's name), u8 flags (bit 0:
//             u64 offset, else u16; bit 1: the message version is a u8, else
//             the last header's), offset, [version], u8 byte length, bytes.
//  kOpCommit: u16 num_chunks, u8 flags (bit 1 as for chunks), [version].
//  kOpEmpty:  a message with no part, u8 version.
//  kOpRaw:    u16 length, that many bytes of a serialized PushChunk.
enum PushOp : uint8_t {
  kOpHeader = 0,
  kOpChunk,
  kOpCommit,
  kOpEmpty,
  kOpRaw,
  kNumPushOps
};
inline constexpr uint8_t kStructuredBit = 2;
inline constexpr uint8_t kAdmmPoolBit = 4;

// The pipeline stream fuzzer's operations (stage_fuzzer.cc): u8 op, op %
// kNumStageOps selects one, the rest of its bits are flags.
enum StageOp : uint8_t {
  kStageHello = 0,  // a StageHello
  kStageBatch,      // Activations
  kStageEnd,        // a StageEnd
  kStageAnswer,     // the stage answers its oldest minibatch
  kStageRaw,        // u16 length, that many bytes of a StageForward
  kNumStageOps
};

// Reads little-endian integers and byte strings front to back; past the end
// every read returns zeros / empty, so any input decodes.
class ByteReader {
 public:
  ByteReader(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  bool empty() const { return pos_ >= size_; }
  uint8_t U8() { return pos_ < size_ ? data_[pos_++] : 0; }
  uint16_t U16() { return static_cast<uint16_t>(U8() | (U8() << 8)); }
  uint64_t U64() {
    uint64_t v = 0;
    for (int i = 0; i < 8; ++i) v |= uint64_t{U8()} << (8 * i);
    return v;
  }
  std::string Bytes(size_t n) {
    const size_t take = n < size_ - pos_ ? n : size_ - pos_;
    std::string s(reinterpret_cast<const char*>(data_ + pos_), take);
    pos_ += take;
    return s;
  }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
};

// Writer counterpart of ByteReader, for the seed generator.
class ByteWriter {
 public:
  void U8(uint8_t v) { out_.push_back(static_cast<char>(v)); }
  void U16(uint16_t v) {
    U8(v & 0xff);
    U8(v >> 8);
  }
  void U64(uint64_t v) {
    for (int i = 0; i < 8; ++i) U8(static_cast<uint8_t>(v >> (8 * i)));
  }
  void Bytes(const std::string& s) { out_ += s; }
  const std::string& str() const { return out_; }

 private:
  std::string out_;
};

}  // namespace fuzz
}  // namespace asgd

#endif  // ASGD_FUZZ_FUZZ_COMMON_H_
