#include "common/tensor_wire.h"

#include <cstring>
#include <utility>

#include "absl/container/inlined_vector.h"
#include "absl/strings/str_cat.h"

namespace asgd {
namespace {

using Pieces = absl::InlinedVector<absl::string_view, 4>;

// Protobuf wire types.
constexpr int kVarint = 0;
constexpr int kFixed64 = 1;
constexpr int kLen = 2;
constexpr int kFixed32 = 5;
// Field numbers stop at 2^29 - 1; larger tags are left to protobuf to reject.
constexpr uint64_t kMaxTag = (uint64_t{1} << 32) - 1;

// Reads the protobuf wire format from consecutive pieces of bytes. Every
// method returns false (and the reader is then unusable) when the bytes run
// out or are malformed.
class Reader {
 public:
  explicit Reader(absl::Span<const absl::string_view> pieces)
      : pieces_(pieces) {
    SkipEmpty();
  }

  bool done() const { return piece_ == pieces_.size(); }

  bool Varint(uint64_t* value) {
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      uint8_t b;
      if (!Byte(&b)) return false;
      v |= static_cast<uint64_t>(b & 0x7f) << shift;
      if ((b & 0x80) == 0) {
        *value = v;
        return true;
      }
    }
    return false;  // more than 10 bytes
  }

  // The next `n` bytes, as views.
  bool Bytes(uint64_t n, Pieces* out) {
    out->clear();
    while (n > 0) {
      if (done()) return false;
      const absl::string_view p = pieces_[piece_];
      const size_t take = std::min<uint64_t>(n, p.size() - pos_);
      out->push_back(p.substr(pos_, take));
      pos_ += take;
      n -= take;
      SkipEmpty();
    }
    return true;
  }

  // A length-delimited field's bytes.
  bool Len(Pieces* out) {
    uint64_t n;
    return Varint(&n) && Bytes(n, out);
  }

  bool Skip(int wire_type) {
    uint64_t v;
    Pieces ignored;
    switch (wire_type) {
      case kVarint: return Varint(&v);
      case kFixed64: return Bytes(8, &ignored);
      case kFixed32: return Bytes(4, &ignored);
      case kLen: return Varint(&v) && Bytes(v, &ignored);
      default: return false;  // groups and invalid types: let protobuf judge
    }
  }

 private:
  bool Byte(uint8_t* b) {
    if (done()) return false;
    *b = static_cast<uint8_t>(pieces_[piece_][pos_++]);
    SkipEmpty();
    return true;
  }
  void SkipEmpty() {
    while (piece_ < pieces_.size() && pos_ == pieces_[piece_].size()) {
      ++piece_;
      pos_ = 0;
    }
  }

  absl::Span<const absl::string_view> pieces_;
  size_t piece_ = 0;
  size_t pos_ = 0;
};

void AppendPieces(const Pieces& pieces, std::string* out) {
  for (absl::string_view p : pieces) out->append(p.data(), p.size());
}

// One field's bytes as a single view: the piece itself, or a copy in
// `scratch` (appended; `scratch` is reserved up front so views stay valid).
absl::string_view Contiguous(const Pieces& pieces, std::string* scratch) {
  if (pieces.empty()) return {};
  if (pieces.size() == 1) return pieces[0];
  const size_t at = scratch->size();
  AppendPieces(pieces, scratch);
  return absl::string_view(scratch->data() + at, scratch->size() - at);
}

// Parses the concatenated pieces with protobuf, `flat` as scratch.
bool ParsePieces(const Pieces& pieces, std::string* flat,
                 google::protobuf::MessageLite* msg) {
  flat->clear();
  AppendPieces(pieces, flat);
  return msg->ParseFromString(*flat);
}

// Calls `field(number, wire_type, reader)` for every field numbered
// 1..max_known, each at most once, and skips the others. False when the bytes
// are malformed, a known field repeats, or `field` returns false: the caller
// then leaves the message to protobuf.
template <typename Fn>
bool ForEachField(const Pieces& bytes, uint64_t max_known, Fn field) {
  Reader r(bytes);
  uint32_t seen = 0;
  while (!r.done()) {
    uint64_t tag;
    if (!r.Varint(&tag) || tag > kMaxTag) return false;
    const uint64_t number = tag >> 3;
    const int type = static_cast<int>(tag & 7);
    if (number == 0) return false;
    if (number > max_known) {
      if (!r.Skip(type)) return false;
      continue;
    }
    if (seen & (1u << number)) return false;
    seen |= 1u << number;
    if (!field(static_cast<int>(number), type, r)) return false;
  }
  return true;
}

// The ordinary encoding of a TensorChunk; false for anything unusual.
bool FastTensorChunk(const Pieces& bytes, std::string* scratch,
                     TensorChunkView* out) {
  return ForEachField(bytes, 4, [&](int number, int type, Reader& r) {
    Pieces field;
    uint64_t v;
    switch (number) {
      case 1:
        if (type != kLen || !r.Len(&field)) return false;
        out->tensor = Contiguous(field, scratch);
        return true;
      case 2:
        return type == kVarint && r.Varint(&out->offset);
      case 3:
        if (type != kLen || !r.Len(&field)) return false;
        out->data.assign(field.begin(), field.end());
        return true;
      default:  // 4: an enum; protobuf keeps the low 32 bits, signed
        if (type != kVarint || !r.Varint(&v)) return false;
        out->dtype = static_cast<int32_t>(static_cast<uint32_t>(v));
        return true;
    }
  });
}

bool FastPush(const Pieces& bytes, ReceivedMessage* storage,
              PushMessage* out) {
  return ForEachField(bytes, 4, [&](int number, int type, Reader& r) {
    if (number == 4) return type == kVarint && r.Varint(&out->model_version);
    // 1..3: the members of the oneof; a second one is left to protobuf.
    Pieces field;
    if (type != kLen || out->part != PushMessage::Part::kNone ||
        !r.Len(&field)) {
      return false;
    }
    if (number == 1) {
      out->part = PushMessage::Part::kHeader;
      return ParsePieces(field, &storage->flat, &out->header);
    }
    if (number == 2) {
      out->part = PushMessage::Part::kChunk;
      return FastTensorChunk(field, &storage->scratch, &out->chunk);
    }
    out->part = PushMessage::Part::kCommit;
    asgd::v1::PushCommit commit;
    if (!ParsePieces(field, &storage->flat, &commit)) return false;
    out->commit_chunks = commit.num_chunks();
    return true;
  });
}

bool FastPull(const Pieces& bytes, ReceivedMessage* storage,
              PullMessage* out) {
  return ForEachField(bytes, 7, [&](int number, int type, Reader& r) {
    if (number == 1) return type == kVarint && r.Varint(&out->model_version);
    if (number == 7) return type == kVarint && r.Varint(&out->lineage);
    if (number == 3 || number == 6) {
      uint64_t v;
      if (type != kVarint || !r.Varint(&v)) return false;
      (number == 3 ? out->end_of_pull : out->exact) = v != 0;
      return true;
    }
    if (number == 4) return type == kVarint && r.Varint(&out->num_chunks);
    Pieces field;
    if (type != kLen || !r.Len(&field)) return false;
    if (number == 5) {  // a small DeltaUpdate: through protobuf
      const absl::string_view bytes = Contiguous(field, &storage->scratch);
      out->has_update = true;
      return out->update.ParseFromArray(bytes.data(),
                                        static_cast<int>(bytes.size()));
    }
    out->has_chunk = true;
    return FastTensorChunk(field, &storage->scratch, &out->chunk);
  });
}

// Dumps the buffer's slices (references, no copy) and views them.
absl::Status Slices(const grpc::ByteBuffer& buffer, ReceivedMessage* storage,
                    Pieces* pieces) {
  storage->slices.clear();
  storage->scratch.clear();
  pieces->clear();
  if (!buffer.Valid()) return absl::OkStatus();  // an empty message
  const grpc::Status s = buffer.Dump(&storage->slices);
  if (!s.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("unreadable message: ", s.error_message()));
  }
  size_t total = 0;
  for (const grpc::Slice& slice : storage->slices) {
    pieces->emplace_back(reinterpret_cast<const char*>(slice.begin()),
                         slice.size());
    total += slice.size();
  }
  // Fields that straddle slices are copied here; never reallocated after.
  storage->scratch.reserve(total);
  return absl::OkStatus();
}

void Reset(TensorChunkView* c) {
  c->tensor = {};
  c->offset = 0;
  c->dtype = 0;
  c->data.clear();
}
void Reset(PushMessage* m) {
  m->part = PushMessage::Part::kNone;
  m->model_version = 0;
  m->header.Clear();
  m->commit_chunks = 0;
  Reset(&m->chunk);
}
void Reset(PullMessage* m) {
  m->model_version = 0;
  m->has_chunk = false;
  m->end_of_pull = false;
  m->num_chunks = 0;
  m->has_update = false;
  m->update.Clear();
  m->exact = false;
  m->lineage = 0;
  Reset(&m->chunk);
}

void PutVarint(uint64_t v, char** p) {
  while (v >= 0x80) {
    *(*p)++ = static_cast<char>((v & 0x7f) | 0x80);
    v >>= 7;
  }
  *(*p)++ = static_cast<char>(v);
}

size_t VarintSize(uint64_t v) {
  size_t n = 1;
  while (v >= 0x80) {
    v >>= 7;
    ++n;
  }
  return n;
}

void PutTag(int number, int type, char** p) {
  PutVarint(static_cast<uint64_t>(number) << 3 | type, p);
}

}  // namespace

absl::Status DecodePushChunk(const grpc::ByteBuffer& buffer,
                             ReceivedMessage* storage, PushMessage* out) {
  Pieces pieces;
  if (absl::Status s = Slices(buffer, storage, &pieces); !s.ok()) return s;
  Reset(out);
  if (FastPush(pieces, storage, out)) return absl::OkStatus();
  if (!ParsePieces(pieces, &storage->flat, &storage->push)) {
    return absl::InvalidArgumentError(
        "malformed push message (not a valid asgd.v1.PushChunk)");
  }
  *out = ViewOf(storage->push);
  return absl::OkStatus();
}

absl::Status DecodePullChunk(const grpc::ByteBuffer& buffer,
                             ReceivedMessage* storage, PullMessage* out) {
  Pieces pieces;
  if (absl::Status s = Slices(buffer, storage, &pieces); !s.ok()) return s;
  Reset(out);
  if (FastPull(pieces, storage, out)) return absl::OkStatus();
  if (!ParsePieces(pieces, &storage->flat, &storage->pull)) {
    return absl::InvalidArgumentError(
        "malformed pull message (not a valid asgd.v1.PullChunk)");
  }
  *out = ViewOf(storage->pull);
  return absl::OkStatus();
}

namespace {

// A message with one TensorChunk of `data_bytes` bytes that `fill` writes.
grpc::ByteBuffer EncodeChunk(ChunkMessageKind kind, uint64_t model_version,
                             absl::string_view tensor, uint64_t offset,
                             int dtype_value, uint64_t data_bytes,
                             absl::FunctionRef<void(char*)> fill,
                             bool exact = false) {
  // TensorChunk, fields in number order, proto3 defaults omitted.
  uint64_t body = 0;
  if (!tensor.empty()) body += 1 + VarintSize(tensor.size()) + tensor.size();
  if (offset != 0) body += 1 + VarintSize(offset);
  if (data_bytes != 0) body += 1 + VarintSize(data_bytes) + data_bytes;
  if (dtype_value != 0) body += 1 + VarintSize(dtype_value);
  const uint64_t version_bytes =
      model_version != 0 ? 1 + VarintSize(model_version) : 0;
  const uint64_t total =
      version_bytes + 1 + VarintSize(body) + body + (exact ? 2 : 0);

  grpc::Slice slice(total);  // uninitialized
  char* p = reinterpret_cast<char*>(const_cast<uint8_t*>(slice.begin()));
  // PullChunk: model_version = 1, chunk = 2.
  // PushChunk: chunk = 2, model_version = 4.
  if (kind == ChunkMessageKind::kPull && model_version != 0) {
    PutTag(1, kVarint, &p);
    PutVarint(model_version, &p);
  }
  PutTag(2, kLen, &p);
  PutVarint(body, &p);
  if (!tensor.empty()) {
    PutTag(1, kLen, &p);
    PutVarint(tensor.size(), &p);
    std::memcpy(p, tensor.data(), tensor.size());
    p += tensor.size();
  }
  if (offset != 0) {
    PutTag(2, kVarint, &p);
    PutVarint(offset, &p);
  }
  if (data_bytes != 0) {
    PutTag(3, kLen, &p);
    PutVarint(data_bytes, &p);
    fill(p);
    p += data_bytes;
  }
  if (dtype_value != 0) {
    PutTag(4, kVarint, &p);
    PutVarint(dtype_value, &p);
  }
  if (kind == ChunkMessageKind::kPush && model_version != 0) {
    PutTag(4, kVarint, &p);
    PutVarint(model_version, &p);
  }
  if (exact) {  // PullChunk.exact = 6
    PutTag(6, kVarint, &p);
    PutVarint(1, &p);
  }
  return grpc::ByteBuffer(&slice, 1);
}

}  // namespace

grpc::ByteBuffer EncodeChunkMessage(ChunkMessageKind kind,
                                    uint64_t model_version,
                                    absl::string_view tensor, uint64_t offset,
                                    WireDtype dtype, int64_t count,
                                    absl::FunctionRef<void(char*)> fill) {
  return EncodeChunk(kind, model_version, tensor, offset,
                     static_cast<int>(dtype),
                     static_cast<uint64_t>(count) * WireBytes(dtype), fill);
}

grpc::ByteBuffer EncodeCompressedChunkMessage(uint64_t model_version,
                                              absl::string_view tensor,
                                              uint64_t offset,
                                              PushEncoding push_encoding,
                                              absl::string_view data) {
  return EncodeChunk(ChunkMessageKind::kPush, model_version, tensor, offset,
                     static_cast<int>(push_encoding), data.size(),
                     [&](char* out) {
                       if (!data.empty()) {
                         std::memcpy(out, data.data(), data.size());
                       }
                     });
}

grpc::ByteBuffer EncodeEndOfPull(uint64_t model_version, uint64_t num_chunks,
                                 bool exact, uint64_t lineage) {
  asgd::v1::PullChunk msg;
  msg.set_model_version(model_version);
  msg.set_end_of_pull(true);
  msg.set_num_chunks(num_chunks);
  msg.set_exact(exact);
  msg.set_lineage(lineage);
  return SerializeToByteBuffer(msg);
}

grpc::ByteBuffer EncodeExactPullChunk(uint64_t model_version,
                                      absl::string_view tensor,
                                      uint64_t offset, int dtype_value,
                                      int64_t data_bytes,
                                      absl::FunctionRef<void(char*)> fill) {
  return EncodeChunk(ChunkMessageKind::kPull, model_version, tensor, offset,
                     dtype_value, static_cast<uint64_t>(data_bytes), fill,
                     /*exact=*/true);
}

grpc::ByteBuffer EncodeDeltaUpdateHeader(uint64_t model_version,
                                         const asgd::v1::DeltaUpdate& update) {
  asgd::v1::PullChunk msg;
  msg.set_model_version(model_version);
  *msg.mutable_update() = update;
  msg.set_exact(true);
  return SerializeToByteBuffer(msg);
}

grpc::ByteBuffer SerializeToByteBuffer(
    const google::protobuf::MessageLite& msg) {
  grpc::Slice slice(msg.ByteSizeLong());
  msg.SerializeWithCachedSizesToArray(const_cast<uint8_t*>(slice.begin()));
  return grpc::ByteBuffer(&slice, 1);
}

absl::Status ParseFromByteBuffer(const grpc::ByteBuffer& buffer,
                                 google::protobuf::MessageLite* msg,
                                 absl::string_view what) {
  ReceivedMessage storage;
  Pieces pieces;
  if (absl::Status s = Slices(buffer, &storage, &pieces); !s.ok()) return s;
  if (!ParsePieces(pieces, &storage.flat, msg)) {
    return absl::InvalidArgumentError(
        absl::StrCat("malformed ", what, " message"));
  }
  return absl::OkStatus();
}

}  // namespace asgd
