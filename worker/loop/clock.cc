#include "worker/loop/clock.h"

#include "absl/time/clock.h"

namespace asgd {
namespace {

class WallClock final : public Clock {
 public:
  absl::Time Now() override { return absl::Now(); }
  void SleepFor(absl::Duration d) override { absl::SleepFor(d); }
};

}  // namespace

Clock* RealClock() {
  static WallClock* const clock = new WallClock();  // stateless, never freed
  return clock;
}

}  // namespace asgd
