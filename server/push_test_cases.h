// The model and the malformed variants of a valid push, shared by the
// PushAssembler, ParamStore and gRPC service tests: each corrupts the
// messages of a valid push (header, chunks, commit) to a server with
// max_chunk_elements 64 and at least 4 chunks, and names the reason and (a
// substring of) the message it must be rejected with. And SubmitAndWait, one
// push to a store, waited for.
#ifndef ASGD_SERVER_PUSH_TEST_CASES_H_
#define ASGD_SERVER_PUSH_TEST_CASES_H_

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/synchronization/notification.h"
#include "common/chunking.h"
#include "common/model_layout.h"
#include "common/wire_codec.h"
#include "step/compressed_apply.h"
#include "compression/grad_codec.h"
#include "compression/grad_encoder.h"
#include "model/model_spec.h"
#include "proto/asgd.pb.h"
#include "server/param_store.h"

namespace asgd {

// Submits one push to `ps`, waits for it and returns its result (a refusal
// of Submit itself as result.error).
inline PushResult SubmitAndWait(ParamStore& ps, PushRequest r) {
  absl::Notification done;
  PushResult result;
  const absl::Status s = ps.Submit(std::move(r), [&](const PushResult& res) {
    result = res;
    done.Notify();
  });
  if (!s.ok()) {
    result.error = s;
    return result;
  }
  done.WaitForNotification();
  return result;
}

// The small DNN these tests serve: 20 inputs, 16 hidden units, 5 classes.
inline ModelSpec PushTestSpec() {
  ModelSpec spec;
  spec.feature_dim = 20;
  spec.context = 0;
  spec.layers = {LayerSpec::Dense(16, Activation::kRelu)};
  spec.num_classes = 5;
  return spec;
}

struct BadPushCase {
  std::string name;
  std::function<void(std::vector<asgd::v1::PushChunk>&)> corrupt;
  RejectReason reason;
  std::string message;  // expected substring
};

inline std::vector<BadPushCase> MalformedPushCases() {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  return {
      {"unknown tensor",
       [](auto& m) { m[1].mutable_chunk()->set_tensor("layer9/weight"); },
       RejectReason::kUnknownTensor, "unknown tensor 'layer9/weight'"},
      {"tensor not on this server",
       [](auto& m) { m[1].mutable_chunk()->set_tensor("layer1/bias"); },
       RejectReason::kUnknownTensor,
       "tensor 'layer1/bias' has no elements on this server"},
      {"bytes not a multiple of 4",
       [](auto& m) { m[2].mutable_chunk()->mutable_data()->pop_back(); },
       RejectReason::kBadSize, "not a positive multiple of 4"},
      {"empty chunk", [](auto& m) { m[2].mutable_chunk()->clear_data(); },
       RejectReason::kBadSize, "has 0 bytes, not a positive multiple of 4"},
      {"chunk longer than the limit",
       [](auto& m) { m[1].mutable_chunk()->mutable_data()->append(16, '\0'); },
       RejectReason::kBadSize, "elements, more than the limit 64"},
      {"chunks out of order", [](auto& m) { std::swap(m[1], m[2]); },
       RejectReason::kBadSequence, "out of sequence"},
      {"duplicate chunk", [](auto& m) { m[2] = m[1]; },
       RejectReason::kBadSequence, "out of sequence"},
      {"missing chunk", [](auto& m) { m.erase(m.begin() + 3); },
       RejectReason::kBadSequence, "out of sequence"},
      {"huge offset",
       [](auto& m) { m[1].mutable_chunk()->set_offset(~uint64_t{0}); },
       RejectReason::kBadSequence, "out of sequence"},
      {"extra chunk after the whole range",
       [](auto& m) { m.insert(m.end() - 1, m[m.size() - 2]); },
       RejectReason::kBadSequence, "after the server's whole slice"},
      {"missing last chunk",
       [](auto& m) {
         m.erase(m.end() - 2);
         m.back().mutable_commit()->set_num_chunks(m.size() - 2);
       },
       RejectReason::kBadSequence, "incomplete: stopped at"},
      {"wrong chunk count",
       [](auto& m) { m.back().mutable_commit()->set_num_chunks(1); },
       RejectReason::kBadSequence, "sender declared 1 chunks but"},
      {"chunk before header", [](auto& m) { m.erase(m.begin()); },
       RejectReason::kBadSequence, "push chunk before the push header"},
      {"commit before header", [](auto& m) { m.erase(m.begin(), m.end() - 1); },
       RejectReason::kBadSequence, "push commit before the push header"},
      {"NaN value",
       [nan](auto& m) {
         std::memcpy(&(*m[3].mutable_chunk()->mutable_data())[8], &nan, 4);
       },
       RejectReason::kNonFinite, "non-finite"},
      {"Inf value",
       [inf](auto& m) {
         std::memcpy(&(*m[1].mutable_chunk()->mutable_data())[0], &inf, 4);
       },
       RejectReason::kNonFinite, "non-finite"},
      {"version mismatch inside the stream",
       [](auto& m) { m[2].set_model_version(3); }, RejectReason::kBadHeader,
       "message carries version 3 but the push header said 0"},
      {"second header", [](auto& m) { m.insert(m.begin() + 2, m[0]); },
       RejectReason::kBadHeader, "second push header"},
      {"no minibatches",
       [](auto& m) { m[0].mutable_header()->set_num_minibatches(0); },
       RejectReason::kBadHeader, "needs 1 <= num_minibatches"},
      {"absurd minibatch count",
       [](auto& m) { m[0].mutable_header()->set_num_minibatches(3000000000u); },
       RejectReason::kBadHeader, "got 3000000000"},
      {"more minibatches than the server allows (2^20: a huge step)",
       [](auto& m) { m[0].mutable_header()->set_num_minibatches(1u << 20); },
       RejectReason::kBadHeader, "num_minibatches <= 64, got 1048576"},
      {"unknown push kind",
       [](auto& m) {
         m[0].mutable_header()->set_kind(
             static_cast<asgd::v1::PushHeader::Kind>(99));
       },
       RejectReason::kBadHeader, "unknown push kind 99"},
      {"100 KB tensor name",
       [](auto& m) {
         m[1].mutable_chunk()->set_tensor(std::string(100 * 1024, 'x'));
       },
       RejectReason::kUnknownTensor, "xxxx...(102400 bytes)'"},
      {"empty message", [](auto& m) { m[2].clear_part(); },
       RejectReason::kBadHeader, "empty push message"},
  };
}

// A valid float32 push to the server of `range` with `value` everywhere, in
// chunks of at most `max_elements`.
inline std::vector<asgd::v1::PushChunk> FloatPushMessages(
    const ModelLayout& layout, FlatRange range, int64_t max_elements,
    float value, uint64_t version) {
  std::vector<asgd::v1::PushChunk> msgs;
  asgd::v1::PushChunk header;
  header.set_model_version(version);
  header.mutable_header()->set_worker_id(7);
  header.mutable_header()->set_model_version(version);
  header.mutable_header()->set_num_minibatches(1);
  msgs.push_back(header);
  const std::vector<ChunkRef> plan = PlanChunks(layout, range, max_elements);
  for (const ChunkRef& c : plan) {
    asgd::v1::PushChunk m;
    m.set_model_version(version);
    m.mutable_chunk()->set_tensor(layout.tensors()[c.tensor].name);
    m.mutable_chunk()->set_offset(c.offset);
    const std::vector<float> values(c.count, value);
    AppendFloats(values.data(), c.count, m.mutable_chunk()->mutable_data());
    msgs.push_back(m);
  }
  asgd::v1::PushChunk commit;
  commit.set_model_version(version);
  commit.mutable_commit()->set_num_chunks(plan.size());
  msgs.push_back(commit);
  return msgs;
}

// A valid compressed push to the server of `range`: the gradient value of
// server-local element i is `base + 0.001 * i` (times -1 for odd i),
// encoded with error feedback from a zero residual in chunks of at most
// `max_elements`. `decoded` (if set) receives what the server must apply.
inline std::vector<asgd::v1::PushChunk> CompressedPushMessages(
    const ModelLayout& layout, FlatRange range, int64_t max_elements,
    PushEncoding encoding, float base, uint64_t version,
    std::vector<float>* decoded = nullptr) {
  std::vector<asgd::v1::PushChunk> msgs;
  asgd::v1::PushChunk header;
  header.set_model_version(version);
  header.mutable_header()->set_worker_id(7);
  header.mutable_header()->set_model_version(version);
  header.mutable_header()->set_num_minibatches(1);
  msgs.push_back(header);
  GradEncoderOptions options;
  options.encoding = encoding == PushEncoding::kTopK ? GradEncoding::kTopK
                                                     : GradEncoding::kOneBit;
  options.top_k_fraction = 0.25;
  GradEncoder encoder = *GradEncoder::Create(layout, range, options);
  std::vector<float> gradient(range.size());
  for (size_t i = 0; i < gradient.size(); ++i) {
    gradient[i] = (i % 2 == 0 ? 1.0f : -1.0f) * (base + 0.001f * i);
  }
  if (decoded != nullptr) decoded->assign(range.size(), 0.0f);
  const std::vector<ChunkRef> plan = PlanChunks(layout, range, max_elements);
  for (const ChunkRef& c : plan) {
    std::string bytes;
    const int64_t local = c.flat_begin - range.begin;
    if (!encoder.EncodeChunk(c, gradient.data() + local, &bytes).ok()) {
      return {};
    }
    if (decoded != nullptr) {
      (void)DecodeCompressedChunk(
          bytes, {}, absl::MakeSpan(decoded->data() + local, c.count));
    }
    asgd::v1::PushChunk m;
    m.set_model_version(version);
    m.mutable_chunk()->set_tensor(layout.tensors()[c.tensor].name);
    m.mutable_chunk()->set_offset(c.offset);
    m.mutable_chunk()->set_dtype(static_cast<asgd::v1::WireDtype>(encoding));
    m.mutable_chunk()->set_data(bytes);
    msgs.push_back(m);
  }
  asgd::v1::PushChunk commit;
  commit.set_model_version(version);
  commit.mutable_commit()->set_num_chunks(plan.size());
  msgs.push_back(commit);
  return msgs;
}

// Malformed variants of a valid 1-bit push (CompressedPushMessages with at
// least 3 chunks): each is refused with INVALID_ARGUMENT.
inline std::vector<BadPushCase> MalformedCompressedPushCases() {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  return {
      {"truncated compressed chunk",
       [](auto& m) { m[1].mutable_chunk()->mutable_data()->pop_back(); },
       RejectReason::kBadEncoding, "one-bit chunk:"},
      {"trailing byte",
       [](auto& m) { m[2].mutable_chunk()->mutable_data()->push_back('x'); },
       RejectReason::kBadEncoding, "one-bit chunk:"},
      {"NaN reconstruction value",
       [nan](auto& m) {
         std::memcpy(&(*m[2].mutable_chunk()->mutable_data())[16], &nan, 4);
       },
       RejectReason::kBadEncoding, "non-finite reconstruction value"},
      {"unknown format version",
       [](auto& m) { (*m[1].mutable_chunk()->mutable_data())[1] = 9; },
       RejectReason::kBadEncoding, "version"},
      {"empty compressed chunk",
       [](auto& m) { m[1].mutable_chunk()->clear_data(); },
       RejectReason::kBadEncoding, "at offset"},
      {"a float chunk in a compressed push",
       [](auto& m) {
         uint32_t count;
         std::memcpy(&count, m[2].chunk().data().data() + 4, 4);
         m[2].mutable_chunk()->set_data(std::string(4 * count, '\0'));
         m[2].mutable_chunk()->set_dtype(asgd::v1::FLOAT32);
       },
       RejectReason::kBadEncoding, "one push has one encoding"},
      {"top-k dtype on 1-bit data",
       [](auto& m) {
         for (size_t i = 1; i + 1 < m.size(); ++i) {
           m[i].mutable_chunk()->set_dtype(asgd::v1::TOP_K);
         }
       },
       RejectReason::kBadEncoding, "holds onebit data but says dtype 3"},
      {"compressed chunks out of order",
       [](auto& m) { std::swap(m[1], m[2]); }, RejectReason::kBadSequence,
       "out of sequence"},
      {"compressed chunk missing",
       [](auto& m) { m.erase(m.end() - 2); }, RejectReason::kBadSequence,
       "incomplete: stopped at"},
      {"compressed assign",
       [](auto& m) {
         m[0].mutable_header()->set_kind(asgd::v1::PushHeader::ASSIGN);
       },
       RejectReason::kBadHeader, "carries weights, not a compressed gradient"},
      {"unknown dtype", [](auto& m) { m[1].mutable_chunk()->set_dtype(
                                          static_cast<asgd::v1::WireDtype>(7)); },
       RejectReason::kBadSize, "unknown element encoding (dtype 7)"},
  };
}

// A top-k compressed gradient of `values` in chunks of `chunk` elements,
// each keeping `fraction` of its elements, with its bytes end to end in one
// buffer as a push assembler leaves them (what the update log keeps).
inline std::shared_ptr<const CompressedGradient> TopKGradient(
    const std::vector<float>& values, int64_t chunk, double fraction) {
  const int64_t n = static_cast<int64_t>(values.size());
  auto storage = std::make_shared<std::string>();
  std::vector<int64_t> sizes;
  for (int64_t at = 0; at < n; at += chunk) {
    const int64_t count = std::min(chunk, n - at);
    std::vector<float> residual(count, 0.0f);
    std::string out;
    if (!EncodeTopK(absl::MakeConstSpan(values.data() + at, count),
                    TopKCount(fraction, count), absl::MakeSpan(residual),
                    &out)
             .ok()) {
      return nullptr;
    }
    *storage += out;
    sizes.push_back(static_cast<int64_t>(out.size()));
  }
  auto gradient = std::make_shared<CompressedGradient>();
  gradient->encoding = GradEncoding::kTopK;
  gradient->encoded = *storage;
  gradient->encoded_sizes = sizes;
  int64_t begin = 0;
  for (int64_t size : sizes) {
    gradient->chunks.push_back(*ParseCompressedChunk(
        absl::string_view(storage->data() + begin, size), {}));
    gradient->max_abs =
        std::max(gradient->max_abs, CompressedMaxAbs(gradient->chunks.back()));
    begin += size;
  }
  gradient->storage = storage;
  return gradient;
}

}  // namespace asgd

#endif  // ASGD_SERVER_PUSH_TEST_CASES_H_
