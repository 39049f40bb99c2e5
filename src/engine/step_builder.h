#pragma once
// Turns a Schedule into the decode graph's StepBatch: each chunk's tokens at their positions,
// its block-table row, its logit row (the chunk's last token), its sampling parameters and the
// penalties on what it has generated.

#include "engine/scheduler.h"
#include "model/decode_plan.h"

namespace evt::engine {

model::StepBatch build_step(const Schedule& s);

}  // namespace evt::engine
