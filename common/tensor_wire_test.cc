#include "common/tensor_wire.h"

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace asgd {
namespace {

using asgd::v1::PullChunk;
using asgd::v1::PushChunk;

std::string Flatten(const grpc::ByteBuffer& buffer) {
  std::vector<grpc::Slice> slices;
  EXPECT_TRUE(buffer.Dump(&slices).ok());
  std::string out;
  for (const grpc::Slice& s : slices) {
    out.append(reinterpret_cast<const char*>(s.begin()), s.size());
  }
  return out;
}

// `bytes` as a ByteBuffer of several slices, cut at `cuts`.
grpc::ByteBuffer Split(const std::string& bytes, std::vector<size_t> cuts) {
  std::vector<grpc::Slice> slices;
  size_t at = 0;
  cuts.push_back(bytes.size());
  for (size_t cut : cuts) {
    cut = std::min(std::max(cut, at), bytes.size());
    slices.emplace_back(bytes.data() + at, cut - at);
    at = cut;
  }
  return grpc::ByteBuffer(slices.data(), slices.size());
}

std::string Joined(const TensorChunkView& c) {
  std::string out;
  for (absl::string_view p : c.data) out.append(p.data(), p.size());
  return out;
}

void ExpectSameChunk(const TensorChunkView& got, const TensorChunkView& want) {
  EXPECT_EQ(got.tensor, want.tensor);
  EXPECT_EQ(got.offset, want.offset);
  EXPECT_EQ(got.dtype, want.dtype);
  EXPECT_EQ(Joined(got), Joined(want));
}

void ExpectSamePush(const PushMessage& got, const PushMessage& want) {
  ASSERT_EQ(got.part, want.part);
  EXPECT_EQ(got.model_version, want.model_version);
  switch (want.part) {
    case PushMessage::Part::kHeader:
      EXPECT_EQ(got.header.SerializeAsString(),
                want.header.SerializeAsString());
      break;
    case PushMessage::Part::kCommit:
      EXPECT_EQ(got.commit_chunks, want.commit_chunks);
      break;
    case PushMessage::Part::kChunk:
      ExpectSameChunk(got.chunk, want.chunk);
      break;
    case PushMessage::Part::kNone:
      break;
  }
}

std::vector<float> Values(int64_t n) {
  std::vector<float> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = 0.25f * static_cast<float>(i) - 3.0f;
  return v;
}

TEST(TensorWireTest, EncodedBytesEqualProtobufSerialization) {
  for (ChunkMessageKind kind : {ChunkMessageKind::kPull, ChunkMessageKind::kPush}) {
    for (WireDtype dtype : {WireDtype::kFloat32, WireDtype::kBfloat16}) {
      for (uint64_t version : {uint64_t{0}, uint64_t{1}, uint64_t{300},
                               uint64_t{1} << 40}) {
        for (uint64_t offset : {uint64_t{0}, uint64_t{5}, uint64_t{1} << 33}) {
          for (const std::string& name : {std::string("fc1/weight"),
                                          std::string(200, 'n'), std::string()}) {
            for (int64_t count : {int64_t{0}, int64_t{1}, int64_t{1000}}) {
              const std::vector<float> values = Values(count);
              std::string data(count * WireBytes(dtype), '\0');
              EncodeFloats(values.data(), count, dtype, data.data());
              asgd::v1::TensorChunk chunk;
              chunk.set_tensor(name);
              chunk.set_offset(offset);
              chunk.set_data(data);
              chunk.set_dtype(static_cast<asgd::v1::WireDtype>(dtype));
              std::string want;
              if (kind == ChunkMessageKind::kPull) {
                PullChunk msg;
                msg.set_model_version(version);
                *msg.mutable_chunk() = chunk;
                want = msg.SerializeAsString();
              } else {
                PushChunk msg;
                msg.set_model_version(version);
                *msg.mutable_chunk() = chunk;
                want = msg.SerializeAsString();
              }
              const grpc::ByteBuffer got = EncodeChunkMessage(
                  kind, version, name, offset, dtype, count, [&](char* out) {
                    EncodeFloats(values.data(), count, dtype, out);
                  });
              ASSERT_EQ(Flatten(got), want)
                  << "version " << version << " offset " << offset
                  << " count " << count << " dtype " << WireDtypeName(dtype);
            }
          }
        }
      }
    }
  }
}

PushChunk ChunkMessage(uint64_t version, int64_t count) {
  PushChunk msg;
  msg.set_model_version(version);
  msg.mutable_chunk()->set_tensor("layer/bias");
  msg.mutable_chunk()->set_offset(12345);
  const std::vector<float> values = Values(count);
  AppendFloats(values.data(), count, msg.mutable_chunk()->mutable_data());
  msg.mutable_chunk()->set_dtype(asgd::v1::BFLOAT16);
  return msg;
}

TEST(TensorWireTest, DecodesAcrossEverySliceBoundary) {
  const PushChunk msg = ChunkMessage(77, 5);
  const std::string bytes = msg.SerializeAsString();
  const PushMessage want = ViewOf(msg);
  for (size_t a = 0; a <= bytes.size(); ++a) {
    for (size_t b : {a, a + 1, a + 2, a + 7, bytes.size()}) {
      ReceivedMessage storage;
      PushMessage got;
      ASSERT_TRUE(DecodePushChunk(Split(bytes, {a, b}), &storage, &got).ok());
      ExpectSamePush(got, want);
    }
  }
  PullChunk pull;
  pull.set_model_version(9);
  *pull.mutable_chunk() = msg.chunk();
  const std::string pull_bytes = pull.SerializeAsString();
  for (size_t a = 0; a <= pull_bytes.size(); ++a) {
    ReceivedMessage storage;
    PullMessage got;
    ASSERT_TRUE(
        DecodePullChunk(Split(pull_bytes, {a, a + 3}), &storage, &got).ok());
    EXPECT_EQ(got.model_version, 9u);
    ASSERT_TRUE(got.has_chunk);
    ExpectSameChunk(got.chunk, ViewOf(pull).chunk);
  }
}

TEST(TensorWireTest, HeaderCommitAndEmptyMessages) {
  PushChunk header;
  header.set_model_version(3);
  header.mutable_header()->set_worker_id(8);
  header.mutable_header()->set_num_minibatches(2);
  header.mutable_header()->set_kind(asgd::v1::PushHeader::ASSIGN);
  PushChunk commit;
  commit.set_model_version(3);
  commit.mutable_commit()->set_num_chunks(41);
  for (const PushChunk& msg : {header, commit, PushChunk()}) {
    ReceivedMessage storage;
    PushMessage got;
    ASSERT_TRUE(DecodePushChunk(SerializeToByteBuffer(msg), &storage, &got).ok());
    ExpectSamePush(got, ViewOf(msg));
  }
}

// Encodings protobuf accepts but the fast path leaves to protobuf: the
// result must be protobuf's.
TEST(TensorWireTest, UnusualEncodingsMeanWhatProtobufSays) {
  const PushChunk a = ChunkMessage(5, 3);
  PushChunk b;
  b.mutable_chunk()->set_offset(999);  // merges into a's chunk
  b.set_model_version(6);              // last one wins
  PushChunk commit;
  commit.mutable_commit()->set_num_chunks(4);
  PushChunk unknown_field;  // field 99, varint
  std::string unknown = "\x98\x06\x2a";
  const std::vector<std::string> cases = {
      a.SerializeAsString() + b.SerializeAsString(),       // repeated fields
      a.SerializeAsString() + commit.SerializeAsString(),  // oneof: last wins
      unknown + a.SerializeAsString() + unknown,           // unknown fields
      // model_version (field 4) before the chunk (field 2).
      b.SerializeAsString().substr(b.SerializeAsString().size() - 2) +
          a.SerializeAsString(),
  };
  for (const std::string& bytes : cases) {
    PushChunk parsed;
    ASSERT_TRUE(parsed.ParseFromString(bytes));
    ReceivedMessage storage;
    PushMessage got;
    ASSERT_TRUE(DecodePushChunk(Split(bytes, {3}), &storage, &got).ok());
    ExpectSamePush(got, ViewOf(parsed));
  }
}

TEST(TensorWireTest, MalformedBytesAreInvalidArgument) {
  const std::string good = ChunkMessage(5, 3).SerializeAsString();
  const std::vector<std::string> bad = {
      good.substr(0, good.size() - 1),           // truncated
      good + "\x12",                             // a tag without its field
      std::string("\x20") + std::string(11, '\xff'),  // varint too long
      std::string("\x0b"),                       // a group start (type 3)
      std::string("\x07\x00"),                   // field 0
  };
  for (const std::string& bytes : bad) {
    ReceivedMessage storage;
    PushMessage got;
    const absl::Status s = DecodePushChunk(Split(bytes, {1}), &storage, &got);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
    PullMessage pulled;
    EXPECT_EQ(DecodePullChunk(Split(bytes, {2}), &storage, &pulled).code(),
              absl::StatusCode::kInvalidArgument);
  }
}

// Random corruptions of valid messages: whenever protobuf accepts the bytes,
// the decoder must accept them too and agree on every field.
TEST(TensorWireTest, AgreesWithProtobufOnCorruptedMessages) {
  std::mt19937 rng(11);
  const std::string good = ChunkMessage(123456, 4).SerializeAsString();
  int accepted = 0;
  for (int trial = 0; trial < 20000; ++trial) {
    std::string bytes = good;
    const int edits = 1 + static_cast<int>(rng() % 3);
    for (int e = 0; e < edits; ++e) {
      const size_t at = rng() % bytes.size();
      switch (rng() % 3) {
        case 0: bytes[at] = static_cast<char>(rng()); break;
        case 1: bytes.erase(at, 1 + rng() % 3); break;
        default: bytes.insert(at, 1, static_cast<char>(rng())); break;
      }
      if (bytes.empty()) bytes = good;
    }
    PushChunk parsed;
    if (!parsed.ParseFromString(bytes)) continue;
    ++accepted;
    ReceivedMessage storage;
    PushMessage got;
    ASSERT_TRUE(
        DecodePushChunk(Split(bytes, {rng() % bytes.size()}), &storage, &got)
            .ok());
    ExpectSamePush(got, ViewOf(parsed));
  }
  EXPECT_GT(accepted, 100);  // the comparison actually ran
}

}  // namespace
}  // namespace asgd

namespace asgd {
namespace {

// The delta-pull messages: encoded bytes equal protobuf's, and the fast
// decoder reads every field as protobuf does, across slice boundaries.
TEST(TensorWireTest, DeltaPullMessages) {
  asgd::v1::DeltaUpdate update;
  update.set_version(9);
  update.set_learning_rate(0.125f);
  update.set_weight_decay(0.5f);
  update.set_num_chunks(3);
  const std::string data = "\x01\x02\x03\x04\x05";
  const std::vector<grpc::ByteBuffer> messages = {
      EncodeDeltaUpdateHeader(12, update),
      EncodeExactPullChunk(12, "", 7, 2, data.size(),
                           [&](char* out) { std::memcpy(out, data.data(), 5); }),
      EncodeExactPullChunk(12, "w", 0, 0, 0, [](char*) {}),
      EncodeEndOfPull(12, 4, /*exact=*/true, /*lineage=*/0xfedcba9876543210u),
  };
  for (const grpc::ByteBuffer& buffer : messages) {
    const std::string bytes = Flatten(buffer);
    asgd::v1::PullChunk proto;
    ASSERT_TRUE(proto.ParseFromString(bytes));
    EXPECT_EQ(proto.SerializeAsString(), bytes);
    const PullMessage want = ViewOf(proto);
    for (size_t cut = 0; cut <= bytes.size(); ++cut) {
      ReceivedMessage storage;
      PullMessage got;
      ASSERT_TRUE(DecodePullChunk(Split(bytes, {cut}), &storage, &got).ok());
      EXPECT_EQ(got.model_version, 12u);
      EXPECT_TRUE(got.exact);
      EXPECT_EQ(got.has_update, want.has_update);
      EXPECT_EQ(got.update.SerializeAsString(),
                want.update.SerializeAsString());
      EXPECT_EQ(got.has_chunk, want.has_chunk);
      if (want.has_chunk) ExpectSameChunk(got.chunk, want.chunk);
      EXPECT_EQ(got.end_of_pull, want.end_of_pull);
      EXPECT_EQ(got.num_chunks, want.num_chunks);
      EXPECT_EQ(got.lineage, want.lineage);
      if (want.end_of_pull) {
        EXPECT_EQ(got.lineage, 0xfedcba9876543210u);
      }
    }
  }
}

}  // namespace
}  // namespace asgd
