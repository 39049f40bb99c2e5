// The CUDA launch's tuning knobs (cuda_launch.h): defaults, and environment variables that
// override them for measurements. Defined here rather than in cuda_launch.cuh, so that changing
// a default rebuilds this file instead of every generated megakernel.

#include <cstdlib>
#include <limits>

#include "runtime/megakernel/cuda_launch.h"

namespace evt::mk {
namespace {

// Environment variable `name` as an integer when it is set and within [lo, hi], else `fallback`.
int env_int(const char* name, int lo, int hi, int fallback) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return fallback;
  char* end = nullptr;
  const long n = std::strtol(v, &end, 10);
  return *end == '\0' && n >= lo && n <= hi ? static_cast<int>(n) : fallback;
}

}  // namespace

// Why kDefaultRingStages is 4. More stages are not faster: the bytes every SM keeps in flight
// lengthen the memory queues that the bodies' own dependent loads wait in. On an H100 (0c368f2,
// ctx 512) 4 stages beat 10 by 4% on Qwen3-8B and 0.6B at B = 1 and by 10% on 0.6B at B = 16; 2
// stages starve the 8B projections. On an H200 (0f45db1) 4 to 12 stages gave steps within 2% of
// each other. All of that with 16 KiB stages; with 32 KiB ones (4e41ba7) 3 to 6 stages were within
// 0.3% and 2 were 1-2% slower at B = 1; but there attention's scratch (104 KiB at head_dim 128)
// held every B = 1 step to three. Given four, Qwen3-8B's and 1.7B's B = 1 steps were 2.1 and 3.7%
// shorter on an H200, and given five 2.0 and 2.2% shorter again, where 0.6B's were up to 2.1%
// longer: the decode plan asks for the fifth where a layer's weights are large enough
// (model/decode_plan.cc's step_ring_stages; bench/results/attention_scratch_ring_ab_h200_e59b255.json).
int ring_stage_cap(int most, int asked) {
  // The variable is read once; the bound applies on each call, so no caller's `most` sticks.
  static const int forced = env_int("EVT_RING_STAGES", 1, std::numeric_limits<int>::max(), 0);
  return forced >= 1 && forced <= most ? forced : asked;
}

// On an H200 (0f45db1) 0 and 256 ns gave the default's step times and longer sleeps only slower
// ones.
constexpr int kDefaultPollNs = 32;
int poll_ns() {
  static const int ns = env_int("EVT_POLL_NS", 0, 100000, kDefaultPollNs);
  return ns;
}

// Why the ring's fills ahead of a task go out one at a time. The loader refills the ring for the
// next task as the consumers release the last chunks of the one before, so every SM sends its
// 128 KiB of copies into the memory system just as the layer's hand-off starts (17 MB over the
// grid, ~3.7 us at the read bandwidth), and the hand-off's dependent round trips queue behind
// them. bench/micro/handoff_micro.cu (H200): an all-to-all hand-off of a 4 KiB vector takes 1.5
// us with the memory idle, 5.0 us behind such a burst of four 32 KiB copies a block, and 2.8 us
// with the same copies one at a time. In the megakernel (H200,
// bench/results/prefetch_in_flight_ab_h200.json) one at a time made B = 1 / 4 steps 0.8-2.9%
// faster (8B -1.8%, 1.7B -2.6% at B = 1) and B = 64 steps 0.1-0.3% slower; two at a time did next
// to nothing.
constexpr int kDefaultPrefetchInFlight = 1;
int prefetch_in_flight() {
  static const int n = env_int("EVT_PREFETCH_IN_FLIGHT", 0, 64, kDefaultPrefetchInFlight);
  return n;
}

// Whether steps of more than 16 tokens run the static entry of wide passes: EVT_WIDE_PASSES=0
// never, 1 for every model (to measure them against the same build's passes of 16); unset, -1,
// as the decoder's rule for the model says (model/decode_plan.cc's wide_pass_sets).
int wide_passes() {
  static const int asked = env_int("EVT_WIDE_PASSES", 0, 1, -1);
  return asked;
}

// -1: the driver splits each SM's 256 KiB between L1 and shared memory as it sees fit.
int smem_carveout() {
  static const int percent = env_int("EVT_SMEM_CARVEOUT", -1, 100, -1);
  return percent;
}

}  // namespace evt::mk
