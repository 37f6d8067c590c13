// libFuzzer target: a push stream (see fuzz_common.h for the encodings) fed to
// PushAssembler for one server of the fuzz model, then, when it commits, to a
// fresh ParamStore.
//
// Besides "no crash, no out-of-bounds access, no undefined behaviour" it
// checks, against a plain reference model of where each accepted chunk must
// land:
//  * every Add() answers OK or INVALID_ARGUMENT (FAILED_PRECONDITION only
//    for a header of a kind the store does not take: ADMM without slots, a
//    gradient or add with them); the first error is final,
//    names a validation reason and releases the staging buffer at once; a
//    buffer is held only once a chunk (or the commit) arrived;
//  * an accepted message follows the one header and carries its version;
//  * an accepted chunk lies inside this server's range, inside one tensor,
//    within the chunk limit, holds only finite values and overlaps nothing
//    accepted before;
//  * the store's push memory budget holds exactly the bytes the accepted
//    chunks staged (float32 values, or a compressed chunk's bytes), nothing
//    once the push is rejected or its request released;
//  * a stream that ends without a commit is rejected as incomplete;
//  * a committed push covers the range exactly once and its request holds
//    exactly the bytes and header fields sent;
//  * the store accepts the request or answers INVALID_ARGUMENT (ABORTED for
//    a version from the future), and an
//    applied ASSIGN push makes the weights exactly the values sent; an
//    update the store refuses (it would leave the weights non-finite)
//    changes nothing (nor the ADMM slots), the weights and slots are always
//    finite, an applied gradient, add or ADMM point moves no weight by more
//    than the store's max-change, and an ADMM point moves the weights by
//    1 / slots of what it moves its slot.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/synchronization/notification.h"
#include "fuzz/fuzz_common.h"
#include "google/protobuf/stubs/logging.h"
#include "proto/asgd.pb.h"
#include "server/param_store.h"
#include "server/push_assembler.h"

namespace asgd {
namespace fuzz {
namespace {

using asgd::v1::PushChunk;

bool IsValidationReason(RejectReason r) {
  switch (r) {
    case RejectReason::kUnknownTensor:
    case RejectReason::kBadSize:
    case RejectReason::kBadSequence:
    case RejectReason::kNonFinite:
    case RejectReason::kBadHeader:
    case RejectReason::kBadEncoding:
      return true;
    default:
      return false;
  }
}

ParamStoreOptions StoreOptions(bool admm, int server_index) {
  return admm ? FuzzAdmmStoreOptions(server_index)
              : FuzzStoreOptions(server_index);
}

// One store per pool and server index, created once; PushAssembler only
// reads their layout, range and options.
const ParamStore& Store(bool admm, int server_index) {
  static ParamStore* const stores[2][kNumServers] = {
      {ParamStore::Create(StoreOptions(false, 0), FuzzInitialModel())
           ->release(),
       ParamStore::Create(StoreOptions(false, 1), FuzzInitialModel())
           ->release()},
      {ParamStore::Create(StoreOptions(true, 0), FuzzInitialModel())->release(),
       ParamStore::Create(StoreOptions(true, 1), FuzzInitialModel())
           ->release()},
  };
  return *stores[admm ? 1 : 0][server_index];
}

std::vector<float> SlotOf(const ParamStore& store, int slot) {
  std::vector<float> out(store.range().size());
  store.ReadSlotEncoded(slot, 0, out.size(), WireDtype::kFloat32,
                        reinterpret_cast<char*>(out.data()));
  return out;
}

// Hands a committed request to a fresh store (so every input starts from
// version 0 and runs are reproducible) and checks what it did.
void SubmitToFreshStore(bool admm_pool, int server_index, PushRequest request) {
  auto created = ParamStore::Create(StoreOptions(admm_pool, server_index),
                                    FuzzInitialModel());
  FUZZ_CHECK(created.ok());
  std::unique_ptr<ParamStore> store = *std::move(created);
  const std::vector<float> initial = store->Snapshot();
  const bool assign = request.kind == PushRequest::Kind::kAssign;
  const bool admm = request.kind == PushRequest::Kind::kAdmm;
  const int slot = request.admm_slot;
  const uint64_t base_version = request.base_version;
  const std::vector<float> sent = *request.values;
  absl::Notification done;
  PushResult result;
  absl::Status s = store->Submit(std::move(request), [&](const PushResult& r) {
    result = r;
    done.Notify();
  });
  if (!s.ok()) {
    // Aborted: a version from the future (the fresh store is at 0).
    FUZZ_CHECK(s.code() == absl::StatusCode::kInvalidArgument ||
               (s.code() == absl::StatusCode::kAborted && base_version > 0));
    return;
  }
  done.WaitForNotification();
  FUZZ_CHECK(result.version == 1);
  FUZZ_CHECK(store->version() == 1);
  // No max_staleness: nothing is dropped. A step that would leave the
  // weights non-finite (huge finite values) is refused whole instead.
  FUZZ_CHECK(result.applied == result.error.ok());
  if (!result.applied) {
    FUZZ_CHECK(!assign);
    FUZZ_CHECK(result.error.code() == absl::StatusCode::kInvalidArgument);
    FUZZ_CHECK(store->Snapshot() == initial);
    for (int k = 0; k < store->admm_slots(); ++k) {
      FUZZ_CHECK(SlotOf(*store, k) == initial);
    }
  }
  for (float w : store->Snapshot()) FUZZ_CHECK(std::isfinite(w));
  if (admm && result.applied) {
    // w = w0 + step / slots and s = w0 + step (every slot starts as w0).
    const std::vector<float> now = store->Snapshot();
    const std::vector<float> s = SlotOf(*store, slot);
    for (size_t i = 0; i < now.size(); ++i) {
      FUZZ_CHECK(std::isfinite(s[i]));
      const double moved = double(now[i]) - initial[i];
      const double slot_moved = double(s[i]) - initial[i];
      FUZZ_CHECK(std::fabs(moved * kFuzzAdmmSlots - slot_moved) <=
                 1e-5 * (std::fabs(slot_moved) + std::fabs(initial[i]) + 1));
    }
  }
  if (!assign && result.applied) {
    const std::vector<float> now = store->Snapshot();
    const double bound = store->options().max_change * (1 + 1e-5);
    for (size_t i = 0; i < now.size(); ++i) {
      FUZZ_CHECK(std::fabs(double(now[i]) - initial[i]) <= bound);
    }
  }
  if (assign) {
    const std::vector<float> now = store->Snapshot();
    FUZZ_CHECK(now.size() == sent.size());
    FUZZ_CHECK(std::memcmp(now.data(), sent.data(), sent.size() * 4) == 0);
  }
}

// The messages of a raw-encoded stream; stops at a record that does not
// parse (the stream breaks there).
std::vector<PushChunk> DecodeRaw(const uint8_t* data, size_t size) {
  std::vector<PushChunk> msgs;
  for (const std::string& record : SplitRecords(data, size)) {
    PushChunk msg;
    if (!msg.ParseFromString(record)) break;
    msgs.push_back(std::move(msg));
  }
  return msgs;
}

// The messages of a structured stream (fuzz_common.h, PushOp).
std::vector<PushChunk> DecodeStructured(const uint8_t* data, size_t size,
                                        const ModelLayout& layout) {
  std::vector<PushChunk> msgs;
  ByteReader in(data, size);
  uint64_t version = 0;  // of the last header
  const int num_tensors = static_cast<int>(layout.tensors().size());
  while (!in.empty()) {
    PushChunk msg;
    switch (in.U8() % kNumPushOps) {
      case kOpHeader: {
        const uint8_t flags = in.U8();
        version = (flags & 1) ? in.U64() : in.U8();
        auto* h = msg.mutable_header();
        h->set_model_version(version);
        if (flags & 2) {
          h->set_kind(asgd::v1::PushHeader::ASSIGN);
        } else if (flags & 8) {
          h->set_kind(asgd::v1::PushHeader::ADD);
        } else if (flags & 16) {
          h->set_kind(asgd::v1::PushHeader::ADMM);
        }
        msg.set_model_version((flags & 4) ? in.U8() : version);
        h->set_worker_id(in.U8());
        const uint8_t k = in.U8();
        h->set_num_minibatches(k == 255 ? static_cast<uint32_t>(in.U64()) : k);
        if (h->kind() == asgd::v1::PushHeader::ADMM) {
          h->set_admm_slot(in.U8() % (2 * kFuzzAdmmSlots));
        }
        break;
      }
      case kOpChunk: {
        auto* c = msg.mutable_chunk();
        const int pick = in.U8() % (num_tensors + 1);
        if (pick == num_tensors) {
          c->set_tensor(in.Bytes(in.U8()));
        } else {
          c->set_tensor(layout.tensors()[pick].name);
        }
        const uint8_t flags = in.U8();
        c->set_offset((flags & 1) ? in.U64() : in.U16());
        msg.set_model_version((flags & 2) ? in.U8() : version);
        c->set_data(in.Bytes(in.U8()));
        break;
      }
      case kOpCommit: {
        msg.mutable_commit()->set_num_chunks(in.U16());
        msg.set_model_version((in.U8() & 2) ? in.U8() : version);
        break;
      }
      case kOpEmpty:
        msg.set_model_version(in.U8());
        break;
      case kOpRaw:
        if (!msg.ParseFromString(in.Bytes(in.U16()))) return msgs;
        break;
    }
    msgs.push_back(std::move(msg));
  }
  return msgs;
}

void Run(const uint8_t* data, size_t size) {
  if (size < 1) return;
  const int server_index = data[0] & 1;
  const bool admm_pool = (data[0] & kAdmmPoolBit) != 0;
  const ParamStore& store = Store(admm_pool, server_index);
  const ModelLayout& layout = store.layout();
  const FlatRange range = store.range();
  const std::vector<PushChunk> msgs =
      (data[0] & kStructuredBit) ? DecodeStructured(data + 1, size - 1, layout)
                                 : DecodeRaw(data + 1, size - 1);

  // Nothing of the budget is held between inputs.
  FUZZ_CHECK(store.stats().staging_bytes == 0);
  std::optional<PushAssembler> assembler_holder;
  assembler_holder.emplace(&store);
  PushAssembler& assembler = *assembler_holder;
  int64_t charged = 0;  // the bytes the accepted chunks staged
  // Reference: the bytes each element should hold and how often it was sent.
  std::vector<float> expected(range.size(), 0.0f);
  std::vector<int> covered(range.size(), 0);
  int64_t accepted_chunks = 0;
  const asgd::v1::PushHeader* header = nullptr;  // the accepted one

  for (const PushChunk& msg : msgs) {
    const bool was_final = assembler.rejected() || assembler.committed();
    const bool was_committed = assembler.committed();
    const RejectReason reason_before = assembler.reject_reason();
    const absl::Status s = assembler.Add(msg);
    FUZZ_CHECK(s.ok() || s.code() == absl::StatusCode::kInvalidArgument ||
               (s.code() == absl::StatusCode::kFailedPrecondition &&
                msg.part_case() == PushChunk::kHeader && !was_final));
    FUZZ_CHECK(s.ok() || !s.message().empty());
    if (was_final) {
      // Nothing changes after the outcome is known.
      FUZZ_CHECK(!s.ok());
      FUZZ_CHECK(assembler.committed() == was_committed);
      FUZZ_CHECK(assembler.reject_reason() == reason_before);
      continue;
    }
    if (!s.ok()) {
      FUZZ_CHECK(assembler.rejected());
      FUZZ_CHECK(!assembler.committed());
      FUZZ_CHECK(!assembler.holds_staging());
      FUZZ_CHECK(IsValidationReason(assembler.reject_reason()));
      FUZZ_CHECK(store.stats().staging_bytes == 0);
      continue;
    }
    FUZZ_CHECK(!assembler.rejected());
    // Memory only once data arrived: a chunk or a commit.
    FUZZ_CHECK(assembler.holds_staging() ==
               (accepted_chunks > 0 || msg.part_case() != PushChunk::kHeader));
    if (msg.part_case() == PushChunk::kHeader) {
      FUZZ_CHECK(header == nullptr);
      FUZZ_CHECK(msg.header().num_minibatches() >= 1);
      header = &msg.header();
    } else {
      FUZZ_CHECK(header != nullptr);
      FUZZ_CHECK(msg.model_version() == header->model_version());
    }
    if (msg.part_case() == PushChunk::kChunk) {
      const auto& c = msg.chunk();
      const int t = layout.FindTensor(c.tensor());
      FUZZ_CHECK(t >= 0);
      const int64_t count = static_cast<int64_t>(c.data().size() / 4);
      FUZZ_CHECK(count >= 1 && c.data().size() % 4 == 0);
      FUZZ_CHECK(count <= store.options().max_chunk_elements);
      FUZZ_CHECK(c.offset() < static_cast<uint64_t>(layout.tensor_size(t)));
      FUZZ_CHECK(static_cast<int64_t>(c.offset()) + count <=
                 layout.tensor_size(t));
      const int64_t local = layout.tensor_offset(t) +
                            static_cast<int64_t>(c.offset()) - range.begin;
      FUZZ_CHECK(local >= 0 && local + count <= range.size());
      std::memcpy(&expected[local], c.data().data(), c.data().size());
      for (int64_t i = 0; i < count; ++i) {
        FUZZ_CHECK(std::isfinite(expected[local + i]));
        FUZZ_CHECK(++covered[local + i] == 1);
      }
      ++accepted_chunks;
      FUZZ_CHECK(assembler.chunks_received() == accepted_chunks);
      charged += c.dtype() == asgd::v1::BFLOAT16
                     ? 2 * static_cast<int64_t>(c.data().size())
                     : static_cast<int64_t>(c.data().size());
    }
    FUZZ_CHECK(store.stats().staging_bytes == charged);
    if (msg.part_case() == PushChunk::kCommit) {
      FUZZ_CHECK(assembler.committed());
      FUZZ_CHECK(msg.commit().num_chunks() ==
                 static_cast<uint64_t>(accepted_chunks));
    }
  }
  // The stream ended (or broke at an unparseable record: the same to the
  // server).
  if (!assembler.committed() && !assembler.rejected()) {
    const absl::Status s = assembler.EndOfStream();
    FUZZ_CHECK(s.code() == absl::StatusCode::kInvalidArgument);
    FUZZ_CHECK(assembler.rejected());
    FUZZ_CHECK(assembler.reject_reason() == RejectReason::kIncomplete);
    FUZZ_CHECK(!assembler.holds_staging());
  }
  if (!assembler.committed()) {
    FUZZ_CHECK(store.stats().staging_bytes == 0);
    FUZZ_CHECK(assembler.TakeRequest().values == nullptr);
    return;
  }
  for (int64_t i = 0; i < range.size(); ++i) FUZZ_CHECK(covered[i] == 1);
  PushRequest request = assembler.TakeRequest();
  FUZZ_CHECK(!assembler.holds_staging());
  FUZZ_CHECK(request.values != nullptr);
  FUZZ_CHECK(request.worker_id == header->worker_id());
  FUZZ_CHECK(request.base_version == header->model_version());
  FUZZ_CHECK(request.num_minibatches ==
             static_cast<int>(header->num_minibatches()));
  FUZZ_CHECK((request.kind == PushRequest::Kind::kAssign) ==
             (header->kind() == asgd::v1::PushHeader::ASSIGN));
  FUZZ_CHECK((request.kind == PushRequest::Kind::kAdd) ==
             (header->kind() == asgd::v1::PushHeader::ADD));
  FUZZ_CHECK((request.kind == PushRequest::Kind::kAdmm) ==
             (header->kind() == asgd::v1::PushHeader::ADMM));
  if (request.kind == PushRequest::Kind::kAdmm) {
    FUZZ_CHECK(admm_pool && request.admm_slot >= 0 &&
               request.admm_slot < kFuzzAdmmSlots &&
               request.admm_slot == static_cast<int>(header->admm_slot()));
  } else {
    FUZZ_CHECK(!admm_pool || request.kind == PushRequest::Kind::kAssign);
  }
  FUZZ_CHECK(static_cast<int64_t>(request.values->size()) == range.size());
  FUZZ_CHECK(std::memcmp(request.values->data(), expected.data(),
                         expected.size() * sizeof(float)) == 0);
  // The request holds the push's charge until it is released.
  FUZZ_CHECK(store.stats().staging_bytes == charged);
  SubmitToFreshStore(admm_pool, server_index, std::move(request));
  FUZZ_CHECK(store.stats().staging_bytes == 0);
}

}  // namespace
}  // namespace fuzz
}  // namespace asgd

extern "C" int LLVMFuzzerInitialize(int* /*argc*/, char*** /*argv*/) {
  // Parse failures (e.g. a tensor name that is not UTF-8) are expected
  // inputs; protobuf's log line for each would drown the fuzzer's output.
  google::protobuf::SetLogHandler(nullptr);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  asgd::fuzz::Run(data, size);
  return 0;
}
