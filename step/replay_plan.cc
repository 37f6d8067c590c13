#include "step/replay_plan.h"

#include <cstring>
#include <utility>

namespace asgd {
namespace {

float LevelAt(const char* levels, int64_t i) {
  float v;
  std::memcpy(&v, levels + 4 * i, sizeof(v));
  return v;
}

}  // namespace

int64_t ReplayPlan::bytes() const {
  return static_cast<int64_t>(
      group_start.size() * sizeof(int64_t) + levels.size() * sizeof(float) +
      bit_origin.size() * sizeof(int64_t) + bits.size() +
      indices.size() * sizeof(int64_t) + values.size() * sizeof(float));
}

ReplayPlanBuilder::ReplayPlanBuilder() { plan_.group_start.push_back(0); }

void ReplayPlanBuilder::Add(const CompressedChunk& chunk) {
  if (chunk.count == 0) return;
  const int64_t base = plan_.count;
  if (chunk.encoding == GradEncoding::kOneBit) {
    plan_.all_top_k = false;
    const int64_t origin = 8 * static_cast<int64_t>(plan_.bits.size());
    for (int64_t g = 0; g < chunk.num_groups; ++g) {
      const int64_t begin = OneBitGroupBegin(chunk, g);
      if (begin >= chunk.count) break;
      if (g > 0) plan_.group_start.push_back(base + begin);
      plan_.levels.push_back(LevelAt(chunk.levels, 2 * g));
      plan_.levels.push_back(LevelAt(chunk.levels, 2 * g + 1));
      plan_.bit_origin.push_back(origin + begin);
    }
    plan_.bits.insert(plan_.bits.end(), chunk.bits,
                      chunk.bits + (chunk.count + 7) / 8);
  } else {
    plan_.levels.push_back(0.0f);
    plan_.levels.push_back(0.0f);
    plan_.bit_origin.push_back(-1);
    TopKReader reader(chunk);
    int64_t index;
    float value;
    while (reader.Next(&index, &value)) {
      plan_.indices.push_back(base + index);
      plan_.values.push_back(value);
    }
  }
  plan_.count = base + chunk.count;
  plan_.group_start.push_back(plan_.count);
}

ReplayPlan ReplayPlanBuilder::Take() {
  ReplayPlan plan = std::move(plan_);
  plan_ = ReplayPlan();
  plan_.group_start.push_back(0);
  return plan;
}

}  // namespace asgd
