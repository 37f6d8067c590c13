// wire_copies_bench: what one push and one pull of the seed-size DNN
// (440-2048x5-40, 17.8 M parameters) cost in host memory passes, per
// encoding, the way asgd builds and reads its messages (common/tensor_wire.h)
// against the way protobuf would (a `bytes` field filled, then serialized;
// parsed into a std::string on receipt), in one process on one core.
//
// Each row is one whole model's worth of one side's work, chunk by chunk
// (the client's 256 Ki-element float chunks; the 1-bit plan's chunks): the
// best of --rounds rounds, in ms, and in "memcpy units": its time over the
// time of one memcpy of the bytes that row puts on the wire (or takes off
// it). A path that writes each byte it sends once, from memory it reads
// once, costs about 1 unit; every extra copy adds about 1. What gRPC and
// the kernel do with the finished slices (the socket copies) is the same for
// every row and not included.
//
//   bazel run -c opt //bench:wire_copies_bench -- --rounds=5
//
// Output: a markdown table and `csv,wire_copies,...` lines.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "bench/bench_util.h"
#include "common/chunking.h"
#include "common/model_layout.h"
#include "common/tensor_wire.h"
#include "common/wire_codec.h"
#include "grpcpp/support/byte_buffer.h"
#include "model/model_spec.h"
#include "proto/asgd.pb.h"
#include "worker/ps/push_encoder.h"

ABSL_FLAG(int, rounds, 3, "Rounds per row (the best is reported).");
ABSL_FLAG(double, min_seconds, 0.3, "Least time per round.");

namespace asgd {
namespace {

using bench::BestSecondsPerPass;

ModelSpec SeedDnn() {
  ModelSpec spec;
  spec.feature_dim = 40;
  spec.context = 5;  // 440 inputs
  for (int i = 0; i < 5; ++i) {
    spec.layers.push_back(LayerSpec::Dense(2048, Activation::kRelu));
  }
  spec.num_classes = 40;
  return spec;
}

struct Row {
  std::string side, path;
  int64_t wire_bytes = 0;
  double seconds = 0;
  double memcpy_seconds = 0;  // of wire_bytes
};

// One memcpy of `bytes` (between buffers larger than the caches).
double MemcpySeconds(int64_t bytes, int rounds, double min_seconds) {
  std::vector<char> a(bytes, 1), b(bytes, 2);
  return BestSecondsPerPass([&] { std::memcpy(b.data(), a.data(), bytes); },
                            rounds, min_seconds);
}

// The data pieces of a decoded chunk into `dst` (check NaN/Inf as the
// servers and clients do).
void DecodeInto(const TensorChunkView& chunk, WireDtype dtype, float* dst) {
  const int64_t size = WireBytes(dtype);
  for (absl::string_view piece : chunk.data) {
    const int64_t n = static_cast<int64_t>(piece.size()) / size;
    if (DecodeFloats(piece.data(), n, dtype, dst, true, nullptr) >= 0) {
      std::abort();  // the bench's values are finite
    }
    dst += n;
  }
}

int Run() {
  const int rounds = absl::GetFlag(FLAGS_rounds);
  const double min_s = absl::GetFlag(FLAGS_min_seconds);
  if (rounds < 1 || !(min_s > 0)) {
    std::fprintf(stderr, "--rounds >= 1 and --min_seconds > 0 are needed\n");
    return 1;
  }
  bench::PrintMachine("wire_copies_bench");
  const ModelSpec spec = SeedDnn();
  absl::StatusOr<ModelLayout> layout =
      ModelLayout::Create(ModelTensors(spec), 1, 1);
  if (!layout.ok()) return 1;
  const int64_t n = layout->total_size();
  std::mt19937 rng(1);
  std::normal_distribution<float> normal(0, 1e-3f);
  std::vector<float> gradient(n), model(n), decoded(n);
  for (float& g : gradient) g = normal(rng);
  std::vector<uint16_t> rounded(n);
  for (int64_t i = 0; i < n; ++i) rounded[i] = FloatToBf16(gradient[i]);
  const std::vector<ChunkRef> chunks =
      PlanChunks(*layout, layout->ServerRange(0), kDefaultMaxChunkElements);
  auto name = [&](const ChunkRef& c) -> const std::string& {
    return layout->tensors()[c.tensor].name;
  };
  std::vector<grpc::ByteBuffer> messages(chunks.size());
  std::vector<Row> rows;
  auto add = [&](std::string side, std::string path, int64_t wire_bytes,
                 const std::function<void()>& pass) {
    Row r{std::move(side), std::move(path), wire_bytes, 0, 0};
    r.seconds = BestSecondsPerPass(pass, rounds, min_s);
    r.memcpy_seconds = MemcpySeconds(wire_bytes, rounds, min_s);
    std::fprintf(stderr, "  %s, %s: %.1f ms\n", r.side.c_str(),
                 r.path.c_str(), 1e3 * r.seconds);
    rows.push_back(std::move(r));
  };

  // ---- float32 and bfloat16 pushes, the worker's side ----
  auto encode = [&](ChunkMessageKind kind, WireDtype dtype,
                    const std::function<void(const ChunkRef&, char*)>& fill) {
    for (size_t k = 0; k < chunks.size(); ++k) {
      const ChunkRef& c = chunks[k];
      messages[k] = EncodeChunkMessage(kind, 7, name(c), c.offset, dtype,
                                       c.count,
                                       [&](char* out) { fill(c, out); });
    }
  };
  auto fp32_fill = [&](const ChunkRef& c, char* out) {
    EncodeFloats(gradient.data() + c.flat_begin, c.count, WireDtype::kFloat32,
                 out);
  };
  add("worker push", "fp32 asgd: written into the slice", 4 * n, [&] {
    encode(ChunkMessageKind::kPush, WireDtype::kFloat32, fp32_fill);
  });
  add("worker push", "fp32 protobuf: bytes field then serialized", 4 * n, [&] {
    for (size_t k = 0; k < chunks.size(); ++k) {
      const ChunkRef& c = chunks[k];
      asgd::v1::PushChunk msg;
      msg.set_model_version(7);
      asgd::v1::TensorChunk* t = msg.mutable_chunk();
      t->set_tensor(name(c));
      t->set_offset(c.offset);
      t->set_data(reinterpret_cast<const char*>(gradient.data() +
                                                c.flat_begin),
                  c.count * sizeof(float));
      messages[k] = SerializeToByteBuffer(msg);
    }
  });
  add("worker push", "bf16: rounded on the host while written", 2 * n, [&] {
    encode(ChunkMessageKind::kPush, WireDtype::kBfloat16,
           [&](const ChunkRef& c, char* out) {
             EncodeFloats(gradient.data() + c.flat_begin, c.count,
                          WireDtype::kBfloat16, out);
           });
  });
  add("worker push", "bf16: rounded by the backend (TakeBf16)", 2 * n, [&] {
    encode(ChunkMessageKind::kPush, WireDtype::kBfloat16,
           [&](const ChunkRef& c, char* out) {
             std::memcpy(out, rounded.data() + c.flat_begin, 2 * c.count);
           });
  });

  // ---- the same float32 push, the server's side ----
  encode(ChunkMessageKind::kPush, WireDtype::kFloat32, fp32_fill);
  ReceivedMessage storage;
  add("server push", "fp32 asgd: views of the slices and one decode", 4 * n,
      [&] {
        for (size_t k = 0; k < chunks.size(); ++k) {
          PushMessage m;
          if (!DecodePushChunk(messages[k], &storage, &m).ok()) std::abort();
          DecodeInto(m.chunk, WireDtype::kFloat32,
                     decoded.data() + chunks[k].flat_begin);
        }
      });
  add("server push", "fp32 protobuf: parsed then decoded", 4 * n, [&] {
    for (size_t k = 0; k < chunks.size(); ++k) {
      asgd::v1::PushChunk msg;
      if (!ParseFromByteBuffer(messages[k], &msg, "push").ok()) std::abort();
      const std::string& data = msg.chunk().data();
      if (DecodeFloats(data.data(), chunks[k].count, WireDtype::kFloat32,
                       decoded.data() + chunks[k].flat_begin, true,
                       nullptr) >= 0) {
        std::abort();
      }
    }
  });

  bool same = decoded == gradient;

  // ---- a float32 pull: the server writes, the worker reads ----
  add("server pull", "fp32 asgd: written into the slice", 4 * n, [&] {
    encode(ChunkMessageKind::kPull, WireDtype::kFloat32, fp32_fill);
  });
  add("worker pull", "fp32 asgd: decoded into the model buffer", 4 * n, [&] {
    for (size_t k = 0; k < chunks.size(); ++k) {
      PullMessage m;
      if (!DecodePullChunk(messages[k], &storage, &m).ok()) std::abort();
      DecodeInto(m.chunk, WireDtype::kFloat32,
                 model.data() + chunks[k].flat_begin);
    }
  });

  same = same && model == gradient;

  // ---- 1-bit pushes: encoded on the host (with its residual) or taken
  // from the backend (only the bytes are copied into the messages) ----
  PushEncoderOptions po;
  po.push_encoding = PushEncoding::kOneBit;
  po.max_chunk_elements = kDefaultMaxChunkElements;
  po.compressed_chunk_elements = PushEncoder::CompressedChunkElements(
      *layout, PushEncoding::kOneBit, 0.01, kGradCodecMaxElements);
  absl::StatusOr<std::unique_ptr<PushEncoder>> encoder =
      PushEncoder::Create(*layout, po);
  if (!encoder.ok()) return 1;
  absl::StatusOr<ServerPush> onebit =
      (*encoder)->Encode(0, gradient, PushKind::kGradient);
  if (!onebit.ok()) return 1;
  int64_t onebit_bytes = 0;
  for (const EncodedChunk& c : onebit->chunks) onebit_bytes += c.bytes.size();
  std::vector<grpc::ByteBuffer> compressed(onebit->chunks.size());
  auto send_bytes = [&](const ServerPush& push) {
    for (size_t k = 0; k < push.chunks.size(); ++k) {
      const EncodedChunk& c = push.chunks[k];
      compressed[k] = EncodeCompressedChunkMessage(
          7, name(c.ref), c.ref.offset, PushEncoding::kOneBit, c.bytes);
    }
  };
  add("worker push", "1-bit: encoded on the host with its residual",
      onebit_bytes, [&] {
        absl::StatusOr<ServerPush> p =
            (*encoder)->Encode(0, gradient, PushKind::kGradient);
        if (!p.ok()) std::abort();
        send_bytes(*p);
      });
  add("worker push", "1-bit: encoded by the backend (bytes only)",
      onebit_bytes, [&] { send_bytes(*onebit); });

  std::printf("# check: the decoded pushes and the pulled model equal the "
              "values sent: %s\n",
              same ? "yes" : "no");
  if (!same) return 1;
  std::printf(
      "\n# One push or pull of the seed-size DNN (%lld parameters), one "
      "core; memcpy units: the row's time / one memcpy of its wire bytes\n\n",
      static_cast<long long>(n));
  std::printf("| side | path | wire MB | ms | memcpy units |\n");
  std::printf("|---|---|---:|---:|---:|\n");
  for (const Row& r : rows) {
    std::printf("| %s | %s | %.1f | %.2f | %.2f |\n", r.side.c_str(),
                r.path.c_str(), r.wire_bytes / 1e6, 1e3 * r.seconds,
                r.seconds / r.memcpy_seconds);
  }
  for (const Row& r : rows) {
    std::printf("csv,wire_copies,%s,%s,%lld,%.6f,%.6f\n", r.side.c_str(),
                r.path.c_str(), static_cast<long long>(r.wire_bytes),
                r.seconds, r.memcpy_seconds);
  }
  return 0;
}

}  // namespace
}  // namespace asgd

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "Host memory passes of one push and one pull of the seed-size DNN, "
      "per encoding, asgd's messages against protobuf's.");
  absl::ParseCommandLine(argc, argv);
  return asgd::Run();
}
