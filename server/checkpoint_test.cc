#include "server/checkpoint.h"

#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <limits>
#include <thread>

#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"

namespace asgd {
namespace {

std::string TestDir(const std::string& name) {
  return std::string(getenv("TEST_TMPDIR") ? getenv("TEST_TMPDIR") : "/tmp") +
         "/" + name;
}

ParamStoreOptions Options(float momentum) {
  ParamStoreOptions o;
  o.tensors = {{"w", {64, 33}}, {"b", {64}}};
  o.num_servers = 2;
  o.server_index = 1;
  o.num_shards = 3;
  o.optimizer.learning_rate = 0.125f;
  o.optimizer.momentum = momentum;
  o.queue_capacity = 1000;
  return o;
}

std::unique_ptr<ParamStore> Store(float momentum) {
  auto store = ParamStore::Create(Options(momentum), std::vector<float>(64 * 34, 0.0f));
  EXPECT_TRUE(store.ok()) << store.status();
  return *std::move(store);
}

void PushOnes(ParamStore& ps, int n, absl::Notification* all_done = nullptr) {
  auto ones = std::make_shared<const std::vector<float>>(ps.range().size(), 1.0f);
  auto count = std::make_shared<std::atomic<int>>(n);
  for (int i = 0; i < n; ++i) {
    PushRequest r;
    r.base_version = ps.accepted();
    r.values = ones;
    ASSERT_TRUE(ps.Submit(std::move(r), [count, all_done](const PushResult&) {
      if (count->fetch_sub(1) == 1 && all_done) all_done->Notify();
    }).ok());
  }
}

TEST(CheckpointTest, SnapshotIsConsistentUnderConcurrentPushes) {
  auto store = Store(0.0f);
  absl::Notification done;
  std::thread pusher([&] { PushOnes(*store, 300, &done); });
  for (int i = 0; i < 20; ++i) {
    auto snap = store->TakeSnapshot();
    ASSERT_TRUE(snap.ok());
    // Every shard stopped after exactly `version` updates of -0.125.
    for (float w : snap->weights) ASSERT_EQ(w, -0.125f * snap->version);
  }
  pusher.join();
  done.WaitForNotification();
  EXPECT_EQ(store->TakeSnapshot()->version, 300u);
}

TEST(CheckpointTest, RoundTripRestoresWeightsStateAndVersion) {
  const std::string dir = TestDir("ckpt_roundtrip");
  auto store = Store(0.5f);
  absl::Notification done;
  PushOnes(*store, 7, &done);
  done.WaitForNotification();
  auto snap = store->TakeSnapshot();
  ASSERT_TRUE(snap.ok());
  ASSERT_TRUE(WriteCheckpoint(dir, store->layout(), 1, *snap).ok());

  auto fresh = Store(0.5f);
  auto read = ReadCheckpoint(dir, fresh->layout(), 1, true);
  ASSERT_TRUE(read.ok()) << read.status();
  ASSERT_TRUE(read->has_value());
  ASSERT_TRUE(fresh->Restore(**read).ok());
  EXPECT_EQ(fresh->version(), 7u);
  EXPECT_EQ(fresh->accepted(), 7u);
  EXPECT_EQ(fresh->Snapshot(), store->Snapshot());
  // The momentum state came back too: the next step matches the original's.
  absl::Notification a, b;
  PushOnes(*store, 1, &a);
  PushOnes(*fresh, 1, &b);
  a.WaitForNotification();
  b.WaitForNotification();
  EXPECT_EQ(fresh->Snapshot(), store->Snapshot());
  EXPECT_FALSE(fresh->Restore(**read).ok());  // only before any update
}

TEST(CheckpointTest, MissingCheckpointIsNotAnError) {
  auto store = Store(0.0f);
  auto read = ReadCheckpoint(TestDir("ckpt_none"), store->layout(), 1, false);
  ASSERT_TRUE(read.ok());
  EXPECT_FALSE(read->has_value());
}

TEST(CheckpointTest, RefusesCorruptAndMismatchedFiles) {
  const std::string dir = TestDir("ckpt_bad");
  auto store = Store(0.0f);
  auto snap = store->TakeSnapshot();
  ASSERT_TRUE(WriteCheckpoint(dir, store->layout(), 1, *snap).ok());
  const std::string path = CheckpointPath(dir, 1, 2);
  std::string good;
  {
    std::ifstream in(path, std::ios::binary);
    good.assign(std::istreambuf_iterator<char>(in), {});
  }
  auto read_with = [&](const std::string& bytes) {
    std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
    return ReadCheckpoint(dir, store->layout(), 1, false).status();
  };
  std::string flipped = good;
  flipped[flipped.size() / 2] ^= 0x40;
  EXPECT_EQ(read_with(flipped).code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(read_with(good.substr(0, good.size() - 9)).code(),
            absl::StatusCode::kDataLoss);
  EXPECT_EQ(read_with("garbage").code(), absl::StatusCode::kDataLoss);
  absl::Status s = read_with(good);
  ASSERT_TRUE(s.ok()) << s;

  // Another model, another server, optimizer state expectations.
  auto other_model = ParamStore::Create(
      [] { auto o = Options(0); o.tensors = {{"w", {64, 34}}}; return o; }(),
      std::vector<float>(64 * 34, 0.0f));
  ASSERT_TRUE(other_model.ok());
  s = ReadCheckpoint(dir, (*other_model)->layout(), 1, false).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_NE(s.message().find("does not belong"), absl::string_view::npos);
  s = ReadCheckpoint(dir, store->layout(), 1, /*needs_state=*/true).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
}

// A checkpoint belongs to one model: with the same tensors, a model of
// another identity (e.g. the same layers with another activation, a
// different spec digest) refuses it.
TEST(CheckpointTest, RefusesACheckpointOfAnotherModelWithTheSameTensors) {
  const std::string dir = TestDir("ckpt_other_model");
  auto store = Store(0.0f);
  auto snap = store->TakeSnapshot();
  const ModelLayout& layout = store->layout();
  auto relu = ModelLayout::Create(layout.tensors(), layout.num_servers(),
                                  layout.num_shards(), "relu-model");
  auto sigmoid = ModelLayout::Create(layout.tensors(), layout.num_servers(),
                                     layout.num_shards(), "sigmoid-model");
  ASSERT_TRUE(relu.ok() && sigmoid.ok());
  ASSERT_TRUE(WriteCheckpoint(dir, *relu, 1, *snap).ok());
  auto same = ReadCheckpoint(dir, *relu, 1, false);
  ASSERT_TRUE(same.ok()) << same.status();
  EXPECT_TRUE(same->has_value());
  const absl::Status other = ReadCheckpoint(dir, *sigmoid, 1, false).status();
  EXPECT_EQ(other.code(), absl::StatusCode::kFailedPrecondition) << other;
}

// Non-finite weights are never written (the previous checkpoint stays) and
// never read back; the generation before the current one is kept.
TEST(CheckpointTest, NeverWritesOrRestoresNonFiniteValuesAndKeepsThePrevious) {
  const std::string dir = TestDir("ckpt_finite");
  auto store = Store(0.5f);
  auto first = store->TakeSnapshot();
  ASSERT_TRUE(first.ok());
  ASSERT_TRUE(WriteCheckpoint(dir, store->layout(), 1, *first).ok());
  absl::Notification done;
  PushOnes(*store, 3, &done);
  done.WaitForNotification();
  auto second = store->TakeSnapshot();
  ASSERT_TRUE(WriteCheckpoint(dir, store->layout(), 1, *second).ok());
  // The current file is the second snapshot, the .prev file the first.
  const std::string path = CheckpointPath(dir, 1, 2);
  const std::string prev = PreviousCheckpointPath(dir, 1, 2);
  EXPECT_EQ(ReadCheckpoint(dir, store->layout(), 1, true)->value().version, 3u);
  std::rename(path.c_str(), (path + ".moved").c_str());
  std::rename(prev.c_str(), path.c_str());
  EXPECT_EQ(ReadCheckpoint(dir, store->layout(), 1, true)->value().version, 0u);
  std::rename((path + ".moved").c_str(), path.c_str());

  StoreSnapshot bad = *second;
  bad.weights[5] = std::numeric_limits<float>::infinity();
  absl::Status s = WriteCheckpoint(dir, store->layout(), 1, bad);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  bad = *second;
  bad.state[7] = std::nanf("");
  EXPECT_FALSE(WriteCheckpoint(dir, store->layout(), 1, bad).ok());
  EXPECT_EQ(ReadCheckpoint(dir, store->layout(), 1, true)->value().version, 3u);

  // A file whose values are non-finite (but whose checksum is right, as a
  // server before this check wrote them) is refused.
  const std::string raw_dir = TestDir("ckpt_nonfinite_file");
  ASSERT_TRUE(WriteCheckpoint(raw_dir, store->layout(), 1, *second).ok());
  std::string bytes;
  {
    std::ifstream in(CheckpointPath(raw_dir, 1, 2), std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  uint32_t header_len;
  std::memcpy(&header_len, bytes.data() + 8, 4);
  const float inf = -std::numeric_limits<float>::infinity();
  std::memcpy(&bytes[12 + header_len], &inf, 4);
  uint64_t h = 1469598103934665603ull;  // the file's FNV-1a checksum
  for (size_t i = 0; i + 8 < bytes.size(); ++i) {
    h ^= static_cast<unsigned char>(bytes[i]);
    h *= 1099511628211ull;
  }
  std::memcpy(&bytes[bytes.size() - 8], &h, 8);
  std::ofstream(CheckpointPath(raw_dir, 1, 2),
                std::ios::binary | std::ios::trunc)
      << bytes;
  s = ReadCheckpoint(raw_dir, store->layout(), 1, true).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
  EXPECT_NE(s.message().find("non-finite"), absl::string_view::npos) << s;
}

// A --checkpoint_dir that is a file, or a checkpoint path that is a
// directory, is a clear error (it used to end in an uncaught exception).
TEST(CheckpointTest, PathsThatAreNotWhatTheyShouldBeAreClearErrors) {
  const std::string file = TestDir("ckpt_a_file");
  std::ofstream(file) << "x";
  absl::Status s = PrepareCheckpointDir(file);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_NE(s.message().find("not a directory"), absl::string_view::npos) << s;
  const std::string nested = TestDir("ckpt_new/a/b");
  EXPECT_TRUE(PrepareCheckpointDir(nested).ok());
  EXPECT_TRUE(PrepareCheckpointDir(nested).ok());  // already there

  const std::string dir = TestDir("ckpt_dir_as_file");
  auto store = Store(0.0f);
  ASSERT_TRUE(PrepareCheckpointDir(CheckpointPath(dir, 1, 2)).ok());
  s = ReadCheckpoint(dir, store->layout(), 1, false).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_NE(s.message().find("not a regular file"), absl::string_view::npos)
      << s;
}

}  // namespace
}  // namespace asgd
