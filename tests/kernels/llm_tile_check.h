#pragma once
// Running the LLM tile cases (llm_tile_cases.h) on the host and judging outputs against the
// reference, shared by the CPU test and the GPU test so that both use one tolerance table and
// one notion of "written".
//
// Every output is poisoned before a run (NaN for f32, 0xFFFF for bf16, 0x7f7f7f7f for i32) and
// sits between guard bands; after the run, elements the row's contract says it writes must hold
// finite values within tolerance of the reference, every other element must still be poison, and
// the guard bands must be intact.

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/llm_tile_cases.h"
#include "kernels/registry.h"

namespace evt::testing::llm {

inline constexpr uint32_t kPoisonF32 = 0x7fc0deadu;  // a quiet NaN with a recognizable payload
inline constexpr uint16_t kPoisonBf16 = 0xffffu;     // a NaN
inline constexpr uint32_t kPoisonI32 = 0x7f7f7f7fu;
inline constexpr size_t kGuardBytes = 256;  // either side of each output
inline constexpr std::byte kGuardByte{0xa5};

// An output buffer's bytes as a run leaves them: guard, payload, guard.
struct GuardedImage {
  std::vector<std::byte> bytes;
  std::byte* payload() { return bytes.data() + kGuardBytes; }
  const std::byte* payload() const { return bytes.data() + kGuardBytes; }
  size_t payload_bytes() const { return bytes.size() - 2 * kGuardBytes; }
  bool guards_intact() const;
};
// A poisoned image of each output of the case.
std::vector<GuardedImage> poisoned_outputs(const Case& c);

// The tolerance table, per output dtype. An f32 element passes when
// |got - want| <= abs + rel * |want|; a bf16 element when that holds or the two are at most
// `ulps` apart; i32 must be equal.
struct Tolerance {
  double abs = 0, rel = 0;
  int64_t ulps = 0;
};
Tolerance tolerance(DType dtype);

// What the comparison of one output found.
struct OutputReport {
  std::string buffer;
  DType dtype = DType::kF32;
  bool scratch = false;      // OutputSpec::scratch: nothing compared, nothing written by contract
  bool untouched = false;    // OutputSpec::untouched: every element compared with the poison
  int64_t written = 0;       // elements the contract says the run writes
  double max_abs_err = 0;    // f32 and bf16 (as floats)
  double max_tol_ratio = 0;  // f32: the largest |got - want| / (abs + rel * |want|); <= 1 passes
  int64_t max_ulps = 0;      // bf16
  int64_t failures = 0;
  std::vector<std::string> messages;  // the first few failures
  bool ok() const { return failures == 0; }
  bool checks_something() const { return scratch || untouched || written > 0; }
  std::string summary() const;  // one line: the buffer and its max errors
};

// Compares each output's `got` image with the reference's `want` image (guards included).
std::vector<OutputReport> compare_outputs(const Case& c, const std::vector<GuardedImage>& got,
                                          const std::vector<GuardedImage>& want);
bool all_ok(const std::vector<OutputReport>& reports);
std::string describe_failures(const std::vector<OutputReport>& reports);

// Runs `fn` (a registry row's reference, or a body through run_body_on_cpu) over every tile of
// the case, but tile number `skip_tile` of the case's box, writing into `outputs`' payloads.
// The case's wtab must hold host addresses (bind_host_weights).
void run_on_cpu(const Case& c, kernels::CpuTileFn fn, std::vector<GuardedImage>& outputs, int64_t skip_tile = -1);

// Moves element `element` of `t` far from its value: +4 for floats (inputs lie in [-4, 4]), +1
// for integers.
void perturb(HostTensor& t, int64_t element);

}  // namespace evt::testing::llm
