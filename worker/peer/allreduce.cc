#include "worker/peer/allreduce.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace asgd {
namespace {

int Mod(int a, int n) { return ((a % n) + n) % n; }

}  // namespace

FlatRange AllreduceSegment(int64_t size, int num_workers, int k) {
  return FlatRange{size * k / num_workers, size * (k + 1) / num_workers};
}

int AllreduceSegmentSent(int sender, int round, int num_workers) {
  if (round < num_workers - 1) return Mod(sender - round, num_workers);
  return Mod(sender + 1 - (round - (num_workers - 1)), num_workers);
}

AllreduceMailbox::AllreduceMailbox(int rank, int num_workers, int64_t size)
    : rank_(rank), num_workers_(num_workers), size_(size) {}

absl::StatusOr<FlatRange> AllreduceMailbox::ExpectedRange(int sender,
                                                          int round) const {
  if (num_workers_ < 2 || sender != Mod(rank_ - 1, num_workers_)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "allreduce message from worker ", sender, ", but worker ", rank_,
        " of ", num_workers_, " receives only from its left neighbour"));
  }
  if (round < 0 || round >= AllreduceRounds(num_workers_)) {
    return absl::InvalidArgumentError(
        absl::StrCat("allreduce round ", round, " out of range [0, ",
                     AllreduceRounds(num_workers_), ")"));
  }
  return AllreduceSegment(size_, num_workers_,
                          AllreduceSegmentSent(sender, round, num_workers_));
}

absl::Status AllreduceMailbox::Deliver(uint64_t iteration, int round,
                                       std::vector<float> values) {
  const int left = Mod(rank_ - 1, num_workers_);
  absl::StatusOr<FlatRange> range = ExpectedRange(left, round);
  if (!range.ok()) return range.status();
  if (static_cast<int64_t>(values.size()) != range->size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("allreduce message of ", values.size(), " floats; round ",
                     round, " carries ", range->size()));
  }
  absl::MutexLock lock(&mu_);
  // The left neighbour cannot run more than about one allreduce ahead.
  if (static_cast<int>(messages_.size()) >= 2 * AllreduceRounds(num_workers_)) {
    return absl::ResourceExhaustedError(
        "too many allreduce messages waiting (a sender far ahead)");
  }
  const bool added =
      messages_.emplace(std::make_pair(iteration, round), std::move(values))
          .second;
  if (!added) {
    return absl::InvalidArgumentError(
        absl::StrCat("duplicate allreduce message (iteration ", iteration,
                     ", round ", round, ")"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<float>> AllreduceMailbox::Take(uint64_t iteration,
                                                          int round,
                                                          absl::Time deadline) {
  const auto key = std::make_pair(iteration, round);
  absl::MutexLock lock(&mu_);
  auto arrived = [this, &key]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return messages_.count(key) > 0;
  };
  if (!mu_.AwaitWithDeadline(absl::Condition(&arrived), deadline)) {
    return absl::DeadlineExceededError(absl::StrCat(
        "no allreduce message (iteration ", iteration, ", round ", round,
        ") from worker ", Mod(rank_ - 1, num_workers_), " in time"));
  }
  auto it = messages_.find(key);
  std::vector<float> values = std::move(it->second);
  messages_.erase(it);
  return values;
}

absl::Status RingAllreduce(PeerClient* peers, AllreduceMailbox* mailbox,
                           uint64_t iteration, absl::Span<float> data,
                           absl::Duration timeout) {
  const int n = mailbox->num_workers();
  const int rank = mailbox->rank();
  if (static_cast<int64_t>(data.size()) != mailbox->size()) {
    return absl::InvalidArgumentError("allreduce vector has the wrong size");
  }
  if (n < 2) return absl::OkStatus();
  const int right = Mod(rank + 1, n);
  const int left = Mod(rank - 1, n);
  for (int round = 0; round < AllreduceRounds(n); ++round) {
    const FlatRange out =
        AllreduceSegment(data.size(), n, AllreduceSegmentSent(rank, round, n));
    absl::Status sent = peers->SendSegment(
        right, iteration, round, out,
        absl::MakeConstSpan(data.data() + out.begin, out.size()));
    if (!sent.ok()) {
      return absl::Status(
          sent.code(),
          absl::StrCat("allreduce round ", round, ": sending to worker ", right,
                       ": ", sent.message()));
    }
    const FlatRange in =
        AllreduceSegment(data.size(), n, AllreduceSegmentSent(left, round, n));
    absl::StatusOr<std::vector<float>> got =
        mailbox->Take(iteration, round, absl::Now() + timeout);
    if (!got.ok()) {
      return absl::Status(got.status().code(),
                          absl::StrCat("allreduce round ", round, ": ",
                                       got.status().message()));
    }
    float* dst = data.data() + in.begin;
    if (round < n - 1) {
      for (int64_t i = 0; i < in.size(); ++i) dst[i] += (*got)[i];
    } else {
      std::copy(got->begin(), got->end(), dst);
    }
  }
  return absl::OkStatus();
}

}  // namespace asgd
