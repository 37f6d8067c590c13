#include "worker/pull_flags.h"

#include "absl/flags/flag.h"

ABSL_FLAG(bool, delta_pulls, true,
          "With float32 pulls: keep an exact copy of each server's slice and "
          "pull only the compressed updates applied since (servers with plain "
          "SGD and a dense model log them; otherwise the weights come). Costs "
          "one more model in memory.");
ABSL_FLAG(int, replay_threads, 0,
          "With --delta_pulls: threads that replay one server's updates, each "
          "on a part of its slice (the result is the same bits). 0: by the "
          "machine's cores, hardware threads / (2 x servers), 1 to 4; at "
          "most 64.");

namespace asgd {

void PullOptionsFromFlags(PoolClientOptions* o) {
  o->delta_pulls = absl::GetFlag(FLAGS_delta_pulls);
  o->replay_threads = absl::GetFlag(FLAGS_replay_threads);
}

}  // namespace asgd
