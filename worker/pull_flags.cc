#include "worker/pull_flags.h"

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

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
ABSL_FLAG(bool, replay_on_device, false,
          "With --backend=cuda and --delta_pulls: keep each server's exact "
          "copy in the GPU's memory and replay the pulled updates there, bit "
          "for bit as on the CPU; a pull then sends the GPU the updates' "
          "bits (about 1/32 of the float32 bytes for 1-bit pushes) instead "
          "of replaying them on this machine's CPU.");

namespace asgd {

void PullOptionsFromFlags(PoolClientOptions* o) {
  o->delta_pulls = absl::GetFlag(FLAGS_delta_pulls);
  o->replay_threads = absl::GetFlag(FLAGS_replay_threads);
}

absl::Status ReplayOnDeviceFromFlags(ModelBackend* backend,
                                     ParamClient* client) {
  if (!absl::GetFlag(FLAGS_replay_on_device)) return absl::OkStatus();
  absl::Status status = client->KeepExactCopiesOn(
      [backend](int64_t count) { return backend->CreateExactCopy(count); });
  if (status.ok()) return status;
  if (absl::IsUnimplemented(status)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--replay_on_device needs a GPU backend (--backend=cuda) and delta "
        "pulls (--delta_pulls with float32 pulls): ",
        status.message()));
  }
  return absl::Status(status.code(),
                      absl::StrCat("--replay_on_device: ", status.message()));
}

std::string DeltaPullSummary(const ParamClient& client) {
  const DeltaPullStats s = client.delta_pull_stats();
  if (s.update_pulls == 0 && !s.copies_elsewhere) return "";
  return absl::StrFormat(
      ", delta pulls: %d of updates (%.1f MB), %d with weights, replayed %s",
      s.update_pulls, s.update_bytes / 1e6, s.weight_pulls,
      s.copies_elsewhere
          ? absl::StrFormat("on the device (plans %.1f MB)", s.plan_bytes / 1e6)
          : std::string("on the CPU"));
}

}  // namespace asgd
