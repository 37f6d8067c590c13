// Ring allreduce among the workers (asgd_worker --mode=allreduce): every
// worker ends with the elementwise sum of all workers' vectors, bitwise the
// same on every worker.
//
// The vector of `size` floats is cut into num_workers contiguous segments
// (segment k is [size*k/n, size*(k+1)/n); some are empty when size < n).
// Worker i sends only to its right neighbour i+1 and receives only from its
// left neighbour i-1, in 2(n-1) rounds:
//  * reduce-scatter, rounds r = 0 .. n-2: send segment (i - r) mod n, receive
//    segment (i - r - 1) mod n and add it to one's own. Afterwards worker i
//    holds the complete sum of segment (i + 1) mod n.
//  * all-gather, rounds r = n-1 .. 2n-3 (s = r - (n-1)): send segment
//    (i + 1 - s) mod n, receive segment (i - s) mod n and keep it as is.
// Each worker sends (and receives) 2(n-1)/n of the vector per allreduce, the
// bandwidth-optimal amount. Every segment's final value is computed by one
// worker and copied by the others, hence bitwise agreement.
//
// The transport pushes: a message goes to the receiver's AllreduceMailbox
// (stored by its peer service while its training thread may be busy), and
// the receiver takes it when it gets to that round. Sends never wait for the
// receiver's training thread, so the ring cannot deadlock; a receive waits at
// most until its deadline (a dead or stuck worker fails the allreduce; there
// is no way around a missing member in a synchronous allreduce).
//
//   AllreduceMailbox mailbox(rank, n, size);   // served by the peer service
//   ASGD_RETURN_IF_ERROR(RingAllreduce(&peers, &mailbox, iteration,
//                                      absl::MakeSpan(grad), timeout));
//
// Thread-safety: AllreduceMailbox is thread-safe. RingAllreduce runs on one
// thread per worker at a time, with increasing iteration numbers.
#ifndef ASGD_WORKER_PEER_ALLREDUCE_H_
#define ASGD_WORKER_PEER_ALLREDUCE_H_

#include <cstdint>
#include <map>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "common/model_layout.h"
#include "worker/peer/peer_client.h"

namespace asgd {

// Segment k of n of a vector of `size` floats.
FlatRange AllreduceSegment(int64_t size, int num_workers, int k);
// The segment `sender` sends in `round`.
int AllreduceSegmentSent(int sender, int round, int num_workers);
inline int AllreduceRounds(int num_workers) { return 2 * (num_workers - 1); }

class AllreduceMailbox {
 public:
  // The mailbox of worker `rank` of `num_workers`, for vectors of `size`.
  AllreduceMailbox(int rank, int num_workers, int64_t size);

  int rank() const { return rank_; }
  int num_workers() const { return num_workers_; }
  int64_t size() const { return size_; }

  // The range a message from `sender` in `round` must cover.
  // InvalidArgument when `sender` is not the left neighbour or the round is
  // out of range.
  absl::StatusOr<FlatRange> ExpectedRange(int sender, int round) const;

  // Stores message (iteration, round). InvalidArgument for a wrong size or a
  // duplicate; ResourceExhausted past a bound on waiting messages (a sender
  // far ahead of this worker, which the protocol rules out).
  absl::Status Deliver(uint64_t iteration, int round,
                       std::vector<float> values);

  // Waits until message (iteration, round) is there, then hands it over.
  // DeadlineExceeded at `deadline`.
  absl::StatusOr<std::vector<float>> Take(uint64_t iteration, int round,
                                          absl::Time deadline);

 private:
  const int rank_;
  const int num_workers_;
  const int64_t size_;
  absl::Mutex mu_;
  std::map<std::pair<uint64_t, int>, std::vector<float>> messages_
      ABSL_GUARDED_BY(mu_);
};

// Replaces `data` (mailbox->size() floats) by the sum over all workers of
// their `data`, through `peers`. Each receive waits at most `timeout`.
// Errors name the round and the peer.
absl::Status RingAllreduce(PeerClient* peers, AllreduceMailbox* mailbox,
                           uint64_t iteration, absl::Span<float> data,
                           absl::Duration timeout);

}  // namespace asgd

#endif  // ASGD_WORKER_PEER_ALLREDUCE_H_
