// DeltaReceiver against well-formed and hostile delta-pull replies: updates
// replayed exactly as a plain float32 step on the decoded gradient, weights
// then updates, and every malformed sequence refused with DataLoss; each
// replayed on the reading thread, split over a PartRunner's threads, and on
// a copy kept elsewhere (an ExactCopy: the device replay's pass, run on the
// host by CreateHostReplayCopy), which all give the same bits.
#include "worker/ps/delta_receiver.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/wire_codec.h"
#include "compression/grad_codec.h"
#include "gtest/gtest.h"
#include "model/cuda/host_replay_copy.h"
#include "worker/ps/part_runner.h"

namespace asgd {
namespace {

constexpr int64_t kSize = 48;  // one tensor of 6 x 8, one server

// The parameter: the parts of the replay (1: on the reading thread), or
// kElsewhere: on an ExactCopy.
constexpr int kElsewhere = 0;

class DeltaReceiverTest : public ::testing::TestWithParam<int> {
 protected:
  DeltaReceiverTest()
      : layout_(*ModelLayout::Create({{"w", {6, 8}}}, 1, 1)),
        range_(layout_.ServerRange(0)),
        runner_(std::max(GetParam(), 1)) {
    copy_.resize(kSize);
    for (int64_t i = 0; i < kSize; ++i) copy_[i] = 0.01f * (i - 20);
  }

  // The copy after the reply: copy_, or the ExactCopy's values.
  std::vector<float> Copy() {
    if (device_ == nullptr) return copy_;
    std::vector<float> out(kSize);
    EXPECT_TRUE(device_->Download(absl::MakeSpan(out)).ok());
    return out;
  }

  // A one-bit chunk of elements [begin, begin + count) of a gradient, and
  // its decoded values appended to `decoded`.
  std::string OneBit(int64_t begin, int64_t count, float scale,
                     std::vector<float>* decoded) {
    std::vector<float> g(count), residual(count, 0.0f);
    for (int64_t i = 0; i < count; ++i) {
      g[i] = scale * std::sin(0.7f * static_cast<float>(begin + i));
    }
    std::string out;
    EXPECT_TRUE(EncodeOneBit(g, 8, 8, absl::MakeSpan(residual), &out).ok());
    std::vector<float> values(count);
    EXPECT_TRUE(
        DecodeCompressedChunk(out, CodecLimits{}, absl::MakeSpan(values)).ok());
    decoded->insert(decoded->end(), values.begin(), values.end());
    return out;
  }

  static PullMessage Header(uint64_t version, float lr, float wd,
                            uint64_t chunks) {
    PullMessage m;
    m.exact = true;
    m.has_update = true;
    m.update.set_version(version);
    m.update.set_learning_rate(lr);
    m.update.set_weight_decay(wd);
    m.update.set_num_chunks(chunks);
    return m;
  }
  // `bytes` must outlive the message.
  static PullMessage Chunk(const std::string& bytes, uint64_t offset,
                           int dtype = static_cast<int>(PushEncoding::kOneBit),
                           absl::string_view tensor = "") {
    PullMessage m;
    m.exact = true;
    m.has_chunk = true;
    m.chunk.tensor = tensor;
    m.chunk.offset = offset;
    m.chunk.dtype = dtype;
    m.chunk.data.push_back(bytes);
    return m;
  }

  // Elsewhere, a new copy holds copy_ and weights land in staging_.
  std::unique_ptr<DeltaReceiver> Receiver(std::optional<uint64_t> held) {
    if (GetParam() == kElsewhere) {
      device_ = *CreateHostReplayCopy(kSize);
      EXPECT_TRUE(device_->Upload(copy_).ok());
    }
    return Again(held);
  }
  // The next reply, on the copy (and mask) the last one left.
  std::unique_ptr<DeltaReceiver> Again(std::optional<uint64_t> held) {
    if (GetParam() != kElsewhere) {
      return std::make_unique<DeltaReceiver>(&layout_, range_, 16, 1 << 20,
                                             copy_.data(), held, &runner_,
                                             nullptr, &keep_);
    }
    staging_.assign(kSize, -1.0f);
    return std::make_unique<DeltaReceiver>(&layout_, range_, 16, 1 << 20,
                                           staging_.data(), held, &runner_,
                                           device_.get(), &keep_);
  }

  ModelLayout layout_;
  FlatRange range_;
  PartRunner runner_;
  std::vector<float> copy_;
  std::vector<uint8_t> keep_;          // the copy's mask (empty elsewhere)
  std::unique_ptr<ExactCopy> device_;  // kElsewhere
  std::vector<float> staging_;         // kElsewhere
};

TEST_P(DeltaReceiverTest, ReplaysUpdatesAsAPlainStep) {
  std::vector<float> g1, g2;
  const std::string a = OneBit(0, 24, 0.5f, &g1);
  const std::string b = OneBit(24, 24, 0.5f, &g1);
  const std::string c = OneBit(0, 48, -0.25f, &g2);
  // Reference: w = w - lr * (g + wd * w), in float32, element by element.
  std::vector<float> want = copy_;
  for (int64_t i = 0; i < kSize; ++i) want[i] = want[i] - 0.1f * g1[i];
  for (int64_t i = 0; i < kSize; ++i) {
    const float g = g2[i] + 0.01f * want[i];
    want[i] = want[i] - 0.05f * g;
  }
  auto r = Receiver(7);
  ASSERT_TRUE(r->Add(Header(8, 0.1f, 0.0f, 2)).ok());
  ASSERT_TRUE(r->Add(Chunk(a, 0)).ok());
  ASSERT_TRUE(r->Add(Chunk(b, 24)).ok());
  ASSERT_TRUE(r->Add(Header(9, 0.05f, 0.01f, 1)).ok());
  ASSERT_TRUE(r->Add(Chunk(c, 0)).ok());
  ASSERT_TRUE(r->Add(Header(10, 0.05f, 0.0f, 0)).ok());  // an empty step
  ASSERT_TRUE(r->Finish(10, 3).ok());
  EXPECT_EQ(r->updates_applied(), 3);
  EXPECT_FALSE(r->received_weights());
  EXPECT_EQ(r->update_bytes(),
            static_cast<int64_t>(a.size() + b.size() + c.size()));
  const std::vector<float> copy = Copy();
  for (int64_t i = 0; i < kSize; ++i) {
    EXPECT_EQ(copy[i], want[i]) << "element " << i;
  }
  if (GetParam() == kElsewhere) {
    // Two plans of six groups of 8 (7 starts, 12 levels, 6 origins, 6
    // bytes of bits); the empty step has none.
    EXPECT_EQ(r->plan_bytes(), 2 * (7 * 8 + 12 * 4 + 6 * 8 + 6));
    EXPECT_EQ(staging_, std::vector<float>(kSize, -1.0f));  // no weights
  } else {
    EXPECT_EQ(r->plan_bytes(), 0);
  }
}

TEST_P(DeltaReceiverTest, WeightsThenUpdates) {
  std::vector<float> weights(kSize, 0.5f), g;
  std::string bytes(reinterpret_cast<const char*>(weights.data()),
                    kSize * sizeof(float));
  const std::string first(bytes.substr(0, 16 * 4)), second(bytes.substr(16 * 4, 16 * 4)),
      third(bytes.substr(32 * 4));
  const std::string u = OneBit(0, 48, 1.0f, &g);
  auto r = Receiver(std::nullopt);
  ASSERT_TRUE(r->Add(Chunk(first, 0, 0, "w")).ok());
  ASSERT_TRUE(r->Add(Chunk(second, 16, 0, "w")).ok());
  ASSERT_TRUE(r->Add(Chunk(third, 32, 0, "w")).ok());
  ASSERT_TRUE(r->Add(Header(5, 0.5f, 0.0f, 1)).ok());
  ASSERT_TRUE(r->Add(Chunk(u, 0)).ok());
  ASSERT_TRUE(r->Finish(5, 4).ok());
  EXPECT_TRUE(r->received_weights());
  const std::vector<float> copy = Copy();
  for (int64_t i = 0; i < kSize; ++i) EXPECT_EQ(copy[i], 0.5f - 0.5f * g[i]);
}

TEST_P(DeltaReceiverTest, RefusesMalformedReplies) {
  std::vector<float> g;
  const std::string whole = OneBit(0, 48, 1.0f, &g);
  const std::string half = OneBit(0, 24, 1.0f, &g);
  const std::vector<float> zeros(kSize, 0.0f);
  const std::string weights(reinterpret_cast<const char*>(zeros.data()),
                            kSize * sizeof(float));
  const std::string w0 = weights.substr(0, 64), w1 = weights.substr(64, 64),
                    w2 = weights.substr(128);
  struct Case {
    const char* name;
    std::optional<uint64_t> held;
    std::vector<PullMessage> messages;
    uint64_t version;
  };
  PullMessage plain = Chunk(whole, 0);
  plain.exact = false;
  PullMessage both = Header(8, 0.1f, 0.0f, 1);
  both.has_chunk = true;
  const std::vector<Case> cases = {
      {"a version skipped", 7, {Header(9, 0.1f, 0.0f, 1), Chunk(whole, 0)}, 9},
      {"update 0 after weights", std::nullopt,
       {Chunk(w0, 0, 0, "w"), Chunk(w1, 16, 0, "w"), Chunk(w2, 32, 0, "w"),
        Header(0, 0.1f, 0.0f, 0)},
       0},
      {"updates for no copy", std::nullopt,
       {Header(1, 0.1f, 0.0f, 1), Chunk(whole, 0)}, 1},
      {"NaN learning rate", 7, {Header(8, NAN, 0.0f, 1)}, 8},
      {"negative decay", 7, {Header(8, 0.1f, -1.0f, 1)}, 8},
      {"zero learning rate", 7, {Header(8, 0.0f, 0.0f, 1)}, 8},
      {"too many chunks", 7, {Header(8, 0.1f, 0.0f, 1000)}, 8},
      {"a gap", 7, {Header(8, 0.1f, 0.0f, 2), Chunk(half, 0), Chunk(half, 30)}, 8},
      {"short of the slice", 7, {Header(8, 0.1f, 0.0f, 1), Chunk(half, 0)}, 8},
      {"beyond the slice", 7,
       {Header(8, 0.1f, 0.0f, 2), Chunk(half, 0), Chunk(whole, 24)}, 8},
      {"a float chunk in an update", 7,
       {Header(8, 0.1f, 0.0f, 1), Chunk(whole, 0, 0)}, 8},
      {"a tensor name in an update", 7,
       {Header(8, 0.1f, 0.0f, 1), Chunk(whole, 0, 2, "w")}, 8},
      {"dtype says top-k, bytes are 1-bit", 7,
       {Header(8, 0.1f, 0.0f, 1), Chunk(whole, 0, 3)}, 8},
      {"garbage bytes", 7,
       {Header(8, 0.1f, 0.0f, 1), Chunk(std::string(40, 'x'), 0)}, 8},
      {"a non-finite result", 7,
       {Header(8, 3e38f, 0.0f, 1), Chunk(whole, 0)}, 8},
      {"plain among exact", 7, {plain}, 8},
      {"update and chunk in one", 7, {both}, 8},
      {"ends inside an update", 7, {Header(8, 0.1f, 0.0f, 1)}, 8},
      {"ends at another version", 7, {}, 8},
      {"header inside an update", 7,
       {Header(8, 0.1f, 0.0f, 2), Chunk(half, 0), Header(9, 0.1f, 0.0f, 0)}, 9},
  };
  const std::vector<float> initial = copy_;
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    copy_ = initial;  // a refused reply may have changed it
    auto r = Receiver(c.held);
    absl::Status status;
    uint64_t chunks = 0;
    for (const PullMessage& m : c.messages) {
      if (m.has_chunk) ++chunks;
      status = r->Add(m);
      if (!status.ok()) break;
    }
    if (status.ok()) status = r->Finish(c.version, chunks);
    EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss) << status;
  }
  // A chunk count that disagrees with what arrived.
  copy_ = initial;
  auto r = Receiver(7);
  ASSERT_TRUE(r->Add(Header(8, 0.1f, 0.0f, 1)).ok());
  ASSERT_TRUE(r->Add(Chunk(whole, 0)).ok());
  EXPECT_EQ(r->Finish(8, 2).code(), absl::StatusCode::kDataLoss);
}

// The bytes of `n` float32 values and of a mask.
std::string FloatBytes(const float* v, int64_t n) {
  return std::string(reinterpret_cast<const char*>(v), n * sizeof(float));
}
std::string MaskBytes(const uint8_t* keep, int64_t n) {
  std::string out(PruneMaskBytes(n), '\0');
  PackPruneMask(keep, n, out.data());
  return out;
}

// A pruned model: each weight chunk comes with its mask; the update after
// them, and one in a later reply on the same copy, move only the weights
// the mask keeps (a pruned element takes gradient 0, as on the server),
// which stay 0 bit for bit. Weights without a mask make the copy dense
// again. A copy kept elsewhere (the device) gets the mask with the weights
// and replays under it there, leaving no host copy of it.
TEST_P(DeltaReceiverTest, PrunedWeightsStayZeroUnderTheMask) {
  std::vector<uint8_t> keep(kSize, 1);
  std::vector<float> weights(kSize, 0.5f), g1, g2;
  for (int64_t i = 0; i < kSize; i += 3) {
    keep[i] = 0;
    weights[i] = 0.0f;
  }
  const std::string w[3] = {FloatBytes(weights.data(), 16),
                            FloatBytes(weights.data() + 16, 16),
                            FloatBytes(weights.data() + 32, 16)};
  const std::string m[3] = {MaskBytes(keep.data(), 16),
                            MaskBytes(keep.data() + 16, 16),
                            MaskBytes(keep.data() + 32, 16)};
  const std::string u1 = OneBit(0, 48, 1.0f, &g1);
  const std::string u2a = OneBit(0, 20, -0.5f, &g2);
  const std::string u2b = OneBit(20, 28, -0.5f, &g2);
  auto r = Receiver(std::nullopt);
  ASSERT_TRUE(r->Add(Chunk(w[0], 0, 0, "w")).ok());
  ASSERT_TRUE(r->Add(Chunk(m[0], 0, kPruneMaskWireDtype, "w")).ok());
  for (int c = 1; c < 3; ++c) {
    ASSERT_TRUE(r->Add(Chunk(w[c], 16 * c, 0, "w")).ok());
    ASSERT_TRUE(r->Add(Chunk(m[c], 16 * c, kPruneMaskWireDtype, "w")).ok());
  }
  ASSERT_TRUE(r->Add(Header(5, 0.5f, 0.0f, 1)).ok());
  ASSERT_TRUE(r->Add(Chunk(u1, 0)).ok());
  ASSERT_TRUE(r->Finish(5, 7).ok());
  if (GetParam() == kElsewhere) {
    EXPECT_TRUE(keep_.empty());  // the copy holds it
  } else {
    EXPECT_EQ(keep_, keep);
  }
  std::vector<float> want(kSize);
  std::vector<float> copy = Copy();
  for (int64_t i = 0; i < kSize; ++i) {
    want[i] = keep[i] != 0 ? 0.5f - 0.5f * g1[i] : 0.0f;
    ASSERT_EQ(copy[i], want[i]) << i;
  }
  // The next reply: updates only, on the copy and its mask.
  auto next = Again(5);
  ASSERT_TRUE(next->Add(Header(6, 0.25f, 0.01f, 2)).ok());
  ASSERT_TRUE(next->Add(Chunk(u2a, 0)).ok());
  ASSERT_TRUE(next->Add(Chunk(u2b, 20)).ok());
  ASSERT_TRUE(next->Finish(6, 2).ok());
  copy = Copy();
  for (int64_t i = 0; i < kSize; ++i) {
    const float x =
        keep[i] != 0 ? want[i] - 0.25f * (g2[i] + 0.01f * want[i]) : 0.0f;
    ASSERT_EQ(copy[i], x) << i;
    EXPECT_EQ(std::signbit(copy[i]), std::signbit(x)) << i;
  }
  // Weights without masks: a dense copy, whose update moves every weight.
  auto dense = Again(std::nullopt);
  for (int c = 0; c < 3; ++c) {
    ASSERT_TRUE(dense->Add(Chunk(w[c], 16 * c, 0, "w")).ok());
  }
  ASSERT_TRUE(dense->Add(Header(8, 0.5f, 0.0f, 1)).ok());
  ASSERT_TRUE(dense->Add(Chunk(u1, 0)).ok());
  ASSERT_TRUE(dense->Finish(8, 4).ok());
  EXPECT_TRUE(keep_.empty());
  copy = Copy();
  for (int64_t i = 0; i < kSize; ++i) {
    ASSERT_EQ(copy[i], weights[i] - 0.5f * g1[i]) << i;
  }
}

// Masks that do not belong to the weights before them, or say what the
// weights contradict: DataLoss.
TEST_P(DeltaReceiverTest, RefusesMalformedMasks) {
  std::vector<uint8_t> keep(kSize, 1);
  std::vector<float> weights(kSize, 0.5f);
  for (int64_t i = 0; i < kSize; i += 3) {
    keep[i] = 0;
    weights[i] = 0.0f;
  }
  std::string w[3], m[3];
  for (int c = 0; c < 3; ++c) {
    w[c] = FloatBytes(weights.data() + 16 * c, 16);
    m[c] = MaskBytes(keep.data() + 16 * c, 16);
  }
  std::vector<uint8_t> wrong = keep;
  wrong[1] = 0;  // pruned, but its weight is 0.5
  const std::string lying = MaskBytes(wrong.data(), 16);
  const int kMask = kPruneMaskWireDtype;
  struct Case {
    const char* name;
    std::vector<PullMessage> messages;
  };
  const std::vector<Case> cases = {
      {"a mask first", {Chunk(m[0], 0, kMask, "w")}},
      {"a mask of another offset",
       {Chunk(w[0], 0, 0, "w"), Chunk(m[1], 16, kMask, "w")}},
      {"two masks for one chunk",
       {Chunk(w[0], 0, 0, "w"), Chunk(m[0], 0, kMask, "w"),
        Chunk(m[0], 0, kMask, "w")}},
      {"a mask of the wrong size",
       {Chunk(w[0], 0, 0, "w"), Chunk(m[0] + "x", 0, kMask, "w")}},
      {"a pruned weight that is not 0",
       {Chunk(w[0], 0, 0, "w"), Chunk(lying, 0, kMask, "w")}},
      {"masks for two of three chunks",
       {Chunk(w[0], 0, 0, "w"), Chunk(m[0], 0, kMask, "w"),
        Chunk(w[1], 16, 0, "w"), Chunk(w[2], 32, 0, "w"),
        Chunk(m[2], 32, kMask, "w")}},
      {"a mask in an update",
       {Chunk(w[0], 0, 0, "w"), Chunk(m[0], 0, kMask, "w"),
        Chunk(w[1], 16, 0, "w"), Chunk(m[1], 16, kMask, "w"),
        Chunk(w[2], 32, 0, "w"), Chunk(m[2], 32, kMask, "w"),
        Header(1, 0.1f, 0.0f, 1), Chunk(m[0], 0, kMask)}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    auto r = Receiver(std::nullopt);
    absl::Status status;
    uint64_t chunks = 0;
    for (const PullMessage& msg : c.messages) {
      if (msg.has_chunk) ++chunks;
      status = r->Add(msg);
      if (!status.ok()) break;
    }
    if (status.ok()) status = r->Finish(0, chunks);
    EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss) << status;
  }
}

INSTANTIATE_TEST_SUITE_P(Parts, DeltaReceiverTest,
                         ::testing::Values(1, 3, kElsewhere),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return info.param == 1   ? std::string("OnArrival")
                                  : info.param == 3 ? "InParts"
                                                    : "OnAnExactCopy";
                         });

// A larger slice, 1-bit and top-k updates (dense and sparse top-k paths),
// chunk edges that fall inside parts: the replay in 2, 3 and 4 parts, and
// the replay of plans on an ExactCopy, leave the same bits as on the
// reading thread.
TEST(DeltaReceiverPartsTest, PartsLeaveTheSameBitsAsOneThread) {
  constexpr int64_t n = 10007;
  const ModelLayout layout = *ModelLayout::Create({{"w", {n}}}, 1, 1);
  struct Update {
    float lr, wd;
    std::vector<std::string> chunks;
  };
  std::vector<Update> updates;
  const std::vector<std::vector<int64_t>> cuts = {
      {3000, 4000, 3007}, {5000, 5007}, {10007}, {1, 9999, 7}};
  for (int u = 0; u < 6; ++u) {
    Update up{0.05f + 0.01f * u, u % 3 == 2 ? 1e-3f : 0.0f, {}};
    int64_t begin = 0;
    for (int64_t count : cuts[u % cuts.size()]) {
      std::vector<float> g(count), residual(count, 0.0f);
      for (int64_t i = 0; i < count; ++i) {
        g[i] = std::sin(0.37f * static_cast<float>(begin + i) + u);
      }
      std::string bytes;
      const absl::Status s =
          u % 2 == 0 ? EncodeOneBit(g, 64, 64, absl::MakeSpan(residual), &bytes)
                     : EncodeTopK(g, std::max<int64_t>(1, count / 100),
                                  absl::MakeSpan(residual), &bytes);
      ASSERT_TRUE(s.ok()) << s;
      up.chunks.push_back(std::move(bytes));
      begin += count;
    }
    updates.push_back(std::move(up));
  }
  std::vector<float> initial(n);
  for (int64_t i = 0; i < n; ++i) initial[i] = 0.001f * (i % 97) - 0.05f;

  auto replay = [&](PartRunner* runner, ExactCopy* device = nullptr) {
    std::vector<float> copy = initial;
    if (device != nullptr) {
      EXPECT_TRUE(device->Upload(initial).ok());
    }
    DeltaReceiver r(&layout, layout.ServerRange(0), 1024, 1 << 20,
                    copy.data(), 20, runner, device);
    uint64_t chunks = 0;
    for (size_t u = 0; u < updates.size(); ++u) {
      PullMessage h;
      h.exact = h.has_update = true;
      h.update.set_version(21 + u);
      h.update.set_learning_rate(updates[u].lr);
      h.update.set_weight_decay(updates[u].wd);
      h.update.set_num_chunks(updates[u].chunks.size());
      EXPECT_TRUE(r.Add(h).ok());
      uint64_t offset = 0;
      for (const std::string& bytes : updates[u].chunks) {
        PullMessage m;
        m.exact = m.has_chunk = true;
        m.chunk.offset = offset;
        m.chunk.dtype = static_cast<int>(u % 2 == 0 ? PushEncoding::kOneBit
                                                    : PushEncoding::kTopK);
        m.chunk.data.push_back(bytes);
        EXPECT_TRUE(r.Add(m).ok());
        offset += ParseCompressedChunk(bytes, CodecLimits{})->count;
        ++chunks;
      }
    }
    EXPECT_TRUE(r.Finish(20 + updates.size(), chunks).ok());
    EXPECT_EQ(r.updates_applied(), static_cast<int64_t>(updates.size()));
    if (device != nullptr) {
      EXPECT_GT(r.plan_bytes(), 0);
      EXPECT_EQ(copy, initial);  // the updates went to the device only
      EXPECT_TRUE(device->Download(absl::MakeSpan(copy)).ok());
    }
    return copy;
  };
  const std::vector<float> serial = replay(nullptr);
  int64_t changed = 0;
  for (int64_t i = 0; i < n; ++i) changed += serial[i] != initial[i];
  EXPECT_EQ(changed, n);  // the 1-bit updates move every element
  for (int parts : {2, 3, 4}) {
    PartRunner runner(parts);
    const std::vector<float> split = replay(&runner);
    EXPECT_EQ(std::memcmp(split.data(), serial.data(), n * sizeof(float)), 0)
        << parts << " parts";
  }
  std::unique_ptr<ExactCopy> device = *CreateHostReplayCopy(n);
  PartRunner unused(3);  // a copy elsewhere replays there, not in parts
  const std::vector<float> elsewhere = replay(&unused, device.get());
  EXPECT_EQ(std::memcmp(elsewhere.data(), serial.data(), n * sizeof(float)), 0);
}

}  // namespace
}  // namespace asgd
