// Writes the seed corpus of the fuzz targets: valid pushes, chunk sequences
// and compressed chunks, Kaldi archives and pipeline streams (the paths the fuzzer should
// start from) and a few invalid ones.
//
//   make_seeds OUT_DIR   # writes OUT_DIR/{push,chunk,codec,kaldi,stage}/*
//
// fuzz/build_and_run.sh --write-seeds regenerates fuzz/corpus with it.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "common/chunking.h"
#include "common/model_layout.h"
#include "compression/grad_codec.h"
#include "fuzz/fuzz_common.h"
#include "kaldi/test_archive.h"
#include "proto/asgd.pb.h"
#include "proto/pipeline.pb.h"

namespace asgd {
namespace fuzz {
namespace {

using asgd::v1::PushChunk;

bool WriteFile(const std::string& path, const std::string& bytes) {
  FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) return false;
  const bool ok = std::fwrite(bytes.data(), 1, bytes.size(), f) == bytes.size();
  return std::fclose(f) == 0 && ok;
}

// The messages of a valid push to `server` of the fuzz model.
std::vector<PushChunk> ValidPush(int server, float value, uint64_t version) {
  auto layout = ModelLayout::Create(FuzzTensors(), kNumServers, kNumShards);
  std::vector<PushChunk> msgs;
  PushChunk header;
  header.set_model_version(version);
  header.mutable_header()->set_worker_id(3);
  header.mutable_header()->set_model_version(version);
  header.mutable_header()->set_num_minibatches(1);
  msgs.push_back(header);
  const auto plan =
      PlanChunks(*layout, layout->ServerRange(server), kMaxChunkElements);
  for (const ChunkRef& c : plan) {
    PushChunk m;
    m.set_model_version(version);
    m.mutable_chunk()->set_tensor(layout->tensors()[c.tensor].name);
    m.mutable_chunk()->set_offset(c.offset);
    std::vector<float> values(c.count);
    for (int64_t i = 0; i < c.count; ++i)
      values[i] = value * (c.flat_begin + i);
    AppendFloats(values.data(), c.count, m.mutable_chunk()->mutable_data());
    msgs.push_back(m);
  }
  PushChunk commit;
  commit.set_model_version(version);
  commit.mutable_commit()->set_num_chunks(plan.size());
  msgs.push_back(commit);
  return msgs;
}

std::string EncodePush(int server, const std::vector<PushChunk>& msgs) {
  std::string out(1, static_cast<char>(server));
  for (const PushChunk& m : msgs) AppendRecord(m.SerializeAsString(), &out);
  return out;
}

// The same stream in the structured encoding (fuzz_common.h, PushOp). Each
// message's version must be its header's; names must be the model's.
std::string EncodePushStructured(int server,
                                 const std::vector<PushChunk>& msgs) {
  auto layout = ModelLayout::Create(FuzzTensors(), kNumServers, kNumShards);
  ByteWriter w;
  w.U8(static_cast<uint8_t>(server | kStructuredBit));
  for (const PushChunk& m : msgs) {
    switch (m.part_case()) {
      case PushChunk::kHeader: {
        const auto& h = m.header();
        w.U8(kOpHeader);
        const bool admm = h.kind() == asgd::v1::PushHeader::ADMM;
        w.U8(1 | (h.kind() == asgd::v1::PushHeader::ASSIGN ? 2 : 0) |
             (h.kind() == asgd::v1::PushHeader::ADD ? 8 : 0) | (admm ? 16 : 0));
        w.U64(h.model_version());
        w.U8(static_cast<uint8_t>(h.worker_id()));
        w.U8(static_cast<uint8_t>(h.num_minibatches()));
        if (admm) w.U8(static_cast<uint8_t>(h.admm_slot()));
        break;
      }
      case PushChunk::kChunk:
        w.U8(kOpChunk);
        w.U8(static_cast<uint8_t>(layout->FindTensor(m.chunk().tensor())));
        w.U8(0);
        w.U16(static_cast<uint16_t>(m.chunk().offset()));
        w.U8(static_cast<uint8_t>(m.chunk().data().size()));
        w.Bytes(m.chunk().data());
        break;
      case PushChunk::kCommit:
        w.U8(kOpCommit);
        w.U16(static_cast<uint16_t>(m.commit().num_chunks()));
        w.U8(0);
        break;
      case PushChunk::PART_NOT_SET:
        w.U8(kOpEmpty);
        w.U8(static_cast<uint8_t>(m.model_version()));
        break;
    }
  }
  return w.str();
}

struct ChunkLayout {
  std::vector<std::vector<uint8_t>> dims;  // per tensor, each dim 1..24
  int servers, shards, server, max_elements;
  bool check_finite;
};

// A chunk_fuzzer input: the layout, then every planned chunk (through
// `corrupt`, which may edit the list) and a Finish with the true count.
std::string EncodeChunks(
    const ChunkLayout& l,
    const std::function<void(std::vector<ChunkRef>&, std::vector<float>&)>&
        corrupt = nullptr) {
  ByteWriter w;
  std::vector<TensorSpec> tensors;
  w.U8(static_cast<uint8_t>(l.dims.size() - 1));
  for (size_t t = 0; t < l.dims.size(); ++t) {
    w.U8(static_cast<uint8_t>(l.dims[t].size() - 1));
    TensorSpec spec{"t" + std::to_string(t), {}};
    for (uint8_t d : l.dims[t]) {
      w.U8(d - 1);
      spec.shape.push_back(d);
    }
    tensors.push_back(spec);
  }
  w.U8(l.servers - 1);
  w.U8(l.shards - 1);
  w.U8(l.server);
  w.U8(l.max_elements - 1);
  w.U8(l.check_finite ? 1 : 0);
  auto layout = ModelLayout::Create(tensors, l.servers, l.shards);
  std::vector<ChunkRef> plan =
      PlanChunks(*layout, layout->ServerRange(l.server), l.max_elements);
  std::vector<float> values(layout->total_size());
  for (size_t i = 0; i < values.size(); ++i) values[i] = 0.25f * i;
  if (corrupt) corrupt(plan, values);
  for (const ChunkRef& c : plan) {
    w.U8(0);                               // op: Add
    w.U8(static_cast<uint8_t>(c.tensor));  // tensor by index
    w.U8(0);                               // u16 offset
    w.U16(static_cast<uint16_t>(c.offset));
    std::string bytes;
    AppendFloats(&values[c.flat_begin], c.count, &bytes);
    w.U16(static_cast<uint16_t>(bytes.size()));
    w.Bytes(bytes);
  }
  w.U8(7);  // op: Finish
  w.U16(static_cast<uint16_t>(plan.size()));
  return w.str();
}

// A codec_fuzzer input (see codec_fuzzer.cc): the settings, then `rest`.
std::string CodecInput(uint8_t flags, const std::string& rest) {
  ByteWriter w;
  w.U8(flags);
  w.U16(998);  // max_elements 999
  w.U16(255);  // max_group_size 256
  w.U16(3);    // sub-range begin
  w.U16(90);   // sub-range end
  w.Bytes(rest);
  return w.str();
}

std::vector<float> Wave(int n) {
  std::vector<float> v(n);
  for (int i = 0; i < n; ++i) v[i] = 0.1f * ((i * 7) % 23) - 1.0f;
  return v;
}

std::string CodecChunk(bool top_k, int n, int param, int first) {
  std::vector<float> grad = Wave(n), residual(n, 0.0f);
  std::string bytes;
  const absl::Status s =
      top_k ? EncodeTopK(grad, param, absl::MakeSpan(residual), &bytes)
            : EncodeOneBit(grad, param, first, absl::MakeSpan(residual), &bytes);
  if (!s.ok()) std::abort();
  return bytes;
}

// Encode mode: codec, parameters, gradient then residual.
std::string CodecEncodeInput(uint8_t flags, bool top_k, int param, int first,
                             int n) {
  ByteWriter w;
  w.U8(top_k ? 1 : 0);
  w.U16(static_cast<uint16_t>(param));
  w.U16(static_cast<uint16_t>(first));
  std::vector<float> values = Wave(2 * n);
  std::string bytes(reinterpret_cast<const char*>(values.data()),
                    values.size() * sizeof(float));
  w.Bytes(bytes);
  return CodecInput(flags | 1, w.str());
}

// Kaldi archives (kaldi_fuzzer.cc: byte 0 is the mode), written with the
// tests' independent writer of the format.
std::vector<std::pair<std::string, std::string>> KaldiSeeds(
    const std::string& dir) {
  namespace kt = asgd::kaldi::testing;
  std::vector<std::pair<std::string, std::string>> seeds;
  kt::TestArchive matrices;
  matrices.Add("fm", kt::FmObject(2, 3, {1, -2, 3.5f, 0, 1e-3f, 7}));
  matrices.Add("dm", kt::DmObject(1, 2, {0.25, -8}));
  matrices.Add("cm",
               kt::CmObject(-1, 4, 5, 2, {{0, 100, 30000, 65535}, {5, 6, 7, 8}},
                            {0, 64, 128, 192, 255, 1, 2, 3, 4, 5}));
  matrices.Add("cm2", kt::Cm2Object(0, 2, 2, 2, {0, 1, 65534, 65535}));
  matrices.Add("cm3", kt::Cm3Object(3, 1, 1, 3, {0, 128, 255}));
  matrices.AddRaw("text  [\n 1 2\n 3 4 ]\n");
  seeds.push_back({"kaldi/matrices", std::string(1, '\0') + matrices.bytes()});
  seeds.push_back({"kaldi/bad_truncated_fm",
                   std::string(1, '\0') +
                       matrices.bytes().substr(0, matrices.offset("fm") + 15)});
  kt::TestArchive ints;
  ints.Add("u1", kt::Int32VectorObject({0, 5, 5, 2}));
  ints.Add("u2", kt::Int32VectorObject({}));
  ints.AddRaw("u3 1 2 3\nu4 7\n");
  seeds.push_back({"kaldi/alignments", std::string(1, '\1') + ints.bytes()});
  kt::TestArchive vectors;
  vectors.Add("fv", kt::FvObject({0.5f, 0.25f}));
  vectors.Add("dv", kt::DvObject({3, 4}));
  vectors.AddRaw("text [ 1 2 3 ]\n");
  seeds.push_back({"kaldi/vectors", std::string(1, '\2') + vectors.bytes()});
  kt::TestArchive one;
  std::vector<float> values(12);
  for (int i = 0; i < 12; ++i) values[i] = static_cast<float>(i);
  one.Add("utt", kt::FmObject(4, 3, values));
  seeds.push_back({"kaldi/rx_range",
                   std::string(1, '\3') + "x.ark:4[1:2,0:1]\n" + one.bytes()});
  seeds.push_back({"kaldi/rx_cm", std::string(1, '\3') + "x.ark:4[0:3]\n" +
                                      "utt " +
                                      kt::Cm3Object(0, 1, 4, 1, {1, 2, 3, 4})});
  kt::TestArchive posts;
  posts.Add("p1", kt::PosteriorObject({{{3, 0.75}, {12, 0.25}}, {}, {{0, 1}}}));
  posts.Add("p2",
            kt::PosteriorObject({{{5, 0.5}, {6, 0.5}}}, /*doubles=*/true));
  posts.AddRaw("p3 [ 4 1 ] [ 4 0.5 8 0.5 ] \n");
  seeds.push_back({"kaldi/posteriors", std::string(1, '\5') + posts.bytes()});
  const std::string gz = dir + "/kaldi/alignments.gz.tmp";
  if (kt::WriteGzipFile(gz, ints.bytes())) {
    seeds.push_back(
        {"kaldi/gzip_alignments", std::string(1, '\4') + kt::ReadFile(gz)});
  }
  std::remove(gz.c_str());
  return seeds;
}

// The pipeline stream fuzzer's seeds (stage_fuzzer.cc's encoding): a
// stage of max_rows 4, width 3, 1 label per row, 5 classes, window 2.
std::vector<std::pair<std::string, std::string>> StageSeeds() {
  auto start = [](bool sequences) {
    ByteWriter w;
    for (uint8_t v : {3, 2, 0, 4}) w.U8(v);
    w.U8(sequences ? 1 : 0);
    w.U8(1);                         // window 2
    w.U8(kStageHello);
    w.U8(0);
    w.U8(2);                         // asks for 2 in flight
    return w;
  };
  auto batch = [](ByteWriter& w, int sequences, int steps, uint8_t value) {
    w.U8(kStageBatch);
    w.U8(0);
    w.U8(sequences);
    w.U8(steps);
    w.U8(0);
    w.U8(0);
    for (int i = 0; i < sequences * steps * 3; ++i) w.U8(value + i);
    for (int i = 0; i < sequences * steps; ++i) w.U8(2 + i % 5);
  };
  auto answer = [](ByteWriter& w) {
    w.U8(kStageAnswer);
    w.U16(0);
    w.U8(0);
  };
  std::vector<std::pair<std::string, std::string>> seeds;
  {
    ByteWriter w = start(false);
    batch(w, 2, 1, 100);
    batch(w, 1, 1, 120);
    answer(w);
    batch(w, 4, 1, 90);
    answer(w);
    answer(w);
    w.U8(kStageEnd);
    w.U8(0);
    seeds.push_back({"stage/valid_frames", w.str()});
  }
  {
    ByteWriter w = start(true);
    batch(w, 2, 2, 128);
    answer(w);
    w.U8(kStageEnd);
    w.U8(0);
    seeds.push_back({"stage/valid_sequences", w.str()});
  }
  {
    ByteWriter w = start(false);
    batch(w, 1, 1, 100);
    batch(w, 1, 1, 100);
    batch(w, 1, 1, 100);  // past the window
    seeds.push_back({"stage/bad_window", w.str()});
  }
  {
    ByteWriter w = start(false);
    batch(w, 1, 1, 253);  // 254: Inf
    seeds.push_back({"stage/bad_inf", w.str()});
  }
  {
    ByteWriter w = start(false);
    batch(w, 1, 1, 100);
    w.U8(kStageEnd);
    w.U8(0);
    batch(w, 1, 1, 100);  // after the end
    seeds.push_back({"stage/bad_after_end", w.str()});
  }
  {
    asgd::v1::StageForward m;
    m.mutable_activations()->set_sequences(1);
    m.mutable_activations()->set_steps(1);
    std::string raw;
    m.SerializeToString(&raw);
    ByteWriter w = start(false);
    w.U8(kStageRaw);
    w.U16(static_cast<uint16_t>(raw.size()));
    w.Bytes(raw);
    seeds.push_back({"stage/raw_short_batch", w.str()});
  }
  return seeds;
}

int Main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: make_seeds OUT_DIR\n");
    return 2;
  }
  const std::string dir = argv[1];
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<std::pair<std::string, std::string>> files;

  // Push streams.
  files.push_back({"push/valid_server0", EncodePush(0, ValidPush(0, 0.5f, 0))});
  files.push_back(
      {"push/valid_server1", EncodePush(1, ValidPush(1, -0.5f, 0))});
  {
    auto m = ValidPush(1, 2.0f, 0);
    m[0].mutable_header()->set_kind(asgd::v1::PushHeader::ASSIGN);
    m[0].mutable_header()->set_num_minibatches(4);
    files.push_back({"push/assign_server1", EncodePush(1, m)});
  }
  {
    auto m = ValidPush(0, 0.25f, 0);
    m[0].mutable_header()->set_kind(asgd::v1::PushHeader::ADD);
    files.push_back({"push/add_server0", EncodePush(0, m)});
  }
  {
    // ADMM points: to a pool with slots (server 1, slot 1), and the same to
    // a pool without them (refused at the header).
    auto m = ValidPush(1, 0.75f, 0);
    m[0].mutable_header()->set_kind(asgd::v1::PushHeader::ADMM);
    m[0].mutable_header()->set_admm_slot(1);
    files.push_back({"push/admm_server1", EncodePush(1 | kAdmmPoolBit, m)});
    files.push_back({"push/admm_no_slots_server1", EncodePush(1, m)});
    files.push_back({"push/structured_admm_server1",
                     EncodePushStructured(1 | kAdmmPoolBit, m)});
  }
  files.push_back(
      {"push/future_version_server1", EncodePush(1, ValidPush(1, 1.0f, 5))});
  {
    auto m = ValidPush(1, 1.0f, 0);
    std::memcpy(&(*m[2].mutable_chunk()->mutable_data())[4], &nan, 4);
    files.push_back({"push/bad_nan_server1", EncodePush(1, m)});
  }
  {
    auto m = ValidPush(0, 1.0f, 0);
    std::swap(m[1], m[2]);
    files.push_back({"push/bad_order_server0", EncodePush(0, m)});
  }
  {
    auto m = ValidPush(1, 1.0f, 0);
    m.pop_back();
    files.push_back({"push/bad_no_commit_server1", EncodePush(1, m)});
  }
  {
    auto m = ValidPush(1, 1.0f, 0);
    m[3].set_model_version(2);
    files.push_back({"push/bad_version_mismatch_server1", EncodePush(1, m)});
  }
  {
    auto m = ValidPush(0, 1.0f, 0);
    m[1].mutable_chunk()->set_tensor("layer1/bias");
    files.push_back({"push/bad_tensor_elsewhere_server0", EncodePush(0, m)});
  }
  {
    auto m = ValidPush(1, 1.0f, 0);
    m.push_back(m[1]);  // a chunk after the commit
    files.push_back({"push/extra_after_commit_server1", EncodePush(1, m)});
  }
  {
    // A record that is not a PushChunk (a truncated varint) after the header.
    auto m = ValidPush(1, 1.0f, 0);
    std::string s(1, '\x01');
    AppendRecord(m[0].SerializeAsString(), &s);
    AppendRecord("\xff\xff\xff", &s);
    for (size_t i = 1; i < m.size(); ++i)
      AppendRecord(m[i].SerializeAsString(), &s);
    files.push_back({"push/bad_unparseable_server1", s});
  }

  // The same kinds of streams in the structured encoding.
  files.push_back({"push/structured_valid_server0",
                   EncodePushStructured(0, ValidPush(0, 0.5f, 0))});
  files.push_back({"push/structured_valid_server1",
                   EncodePushStructured(1, ValidPush(1, -0.5f, 0))});
  {
    auto m = ValidPush(1, 2.0f, 0);
    m[0].mutable_header()->set_kind(asgd::v1::PushHeader::ASSIGN);
    files.push_back(
        {"push/structured_assign_server1", EncodePushStructured(1, m)});
  }
  {
    auto m = ValidPush(1, -0.25f, 0);
    m[0].mutable_header()->set_kind(asgd::v1::PushHeader::ADD);
    files.push_back(
        {"push/structured_add_server1", EncodePushStructured(1, m)});
  }
  {
    auto m = ValidPush(0, 1.0f, 0);
    m.insert(m.begin() + 2, PushChunk());  // an empty message
    files.push_back(
        {"push/structured_bad_empty_server0", EncodePushStructured(0, m)});
  }

  // Chunk sequences.
  const ChunkLayout small{{{5, 6}, {5}, {3, 5}, {3}}, 2, 2, 1, 8, true};
  const ChunkLayout wide{{{20, 24}, {24}, {24, 3}}, 3, 2, 1, 64, false};
  const ChunkLayout one{{{7}}, 1, 1, 0, 1, true};
  files.push_back({"chunk/valid_small", EncodeChunks(small)});
  files.push_back({"chunk/valid_wide", EncodeChunks(wide)});
  files.push_back({"chunk/valid_one", EncodeChunks(one)});
  files.push_back(
      {"chunk/bad_offset_small",
       EncodeChunks(small, [](auto& plan, auto&) { plan[2].offset -= 1; })});
  files.push_back(
      {"chunk/bad_missing_wide", EncodeChunks(wide, [](auto& plan, auto&) {
         plan.erase(plan.begin() + 1);
       })});
  files.push_back({"chunk/bad_nan_small",
                   EncodeChunks(small, [nan](auto& plan, auto& values) {
                     values[plan[1].flat_begin] = nan;
                   })});

  // Compressed chunks (flags: bits 1-2 pick the optimizer).
  const std::string one_bit = CodecChunk(false, 100, 16, 5);
  const std::string top_k = CodecChunk(true, 300, 20, 0);
  files.push_back({"codec/onebit_sgd", CodecInput(0, one_bit)});
  files.push_back({"codec/onebit_momentum", CodecInput(2, one_bit)});
  files.push_back({"codec/topk_nesterov_decay", CodecInput(4, top_k)});
  files.push_back({"codec/topk_dc", CodecInput(6, top_k)});
  files.push_back({"codec/topk_sgd", CodecInput(0, top_k)});
  // Every element selected: the last index is count - 1, one step from the
  // bound.
  files.push_back(
      {"codec/topk_all_momentum", CodecInput(2, CodecChunk(true, 40, 40, 0))});
  {
    std::string bad = one_bit;
    std::memcpy(&bad[16 + 8], &nan, 4);
    files.push_back({"codec/bad_onebit_nan_level", CodecInput(0, bad)});
  }
  {
    std::string bad = top_k;
    bad.back() = 0x7f;
    files.push_back({"codec/bad_topk_index", CodecInput(0, bad)});
  }
  files.push_back(
      {"codec/encode_onebit", CodecEncodeInput(2, false, 14, 3, 40)});
  files.push_back({"codec/encode_topk", CodecEncodeInput(0, true, 7, 0, 40)});
  for (auto& seed : KaldiSeeds(dir)) files.push_back(std::move(seed));
  for (auto& seed : StageSeeds()) files.push_back(std::move(seed));

  for (const auto& [name, bytes] : files) {
    if (!WriteFile(dir + "/" + name, bytes)) {
      std::fprintf(stderr, "make_seeds: cannot write %s/%s\n", dir.c_str(),
                   name.c_str());
      return 1;
    }
  }
  std::printf("make_seeds: wrote %zu files under %s\n", files.size(),
              dir.c_str());
  return 0;
}

}  // namespace
}  // namespace fuzz
}  // namespace asgd

int main(int argc, char** argv) { return asgd::fuzz::Main(argc, argv); }
