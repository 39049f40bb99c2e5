#pragma once
// The core of every projection tile: the 16-row groups [g0, g0 + groups) of a tiled bf16 weight
// matrix (weight_tiles.h) times the activations of every token of the step, over the columns
// [k0, k1), with the input's RMSNorm optionally fused in.
//
// Decode reads each weight once, so the design is about the weight stream:
//  1. The weights arrive as the task's stream (kernels/weight_stream.h): on the GPU the loader
//     warp copies them into a shared-memory ring ahead of the body, across its dependency wait;
//     the body only reads shared memory.
//  2. The block stages the tile's activations in shared memory, normalized and rounded to bf16
//     (as Hugging Face feeds its bf16 linears), columns past k1 zeroed: a pass of up to
//     kPassTokens tokens at a time, and within a pass as many k-blocks as the scratch holds (a
//     segment). So a pass streams its weights once however wide its rows: the stage is refilled
//     between segments, mid-stream, instead of the weights being streamed again for fewer tokens
//     (Qwen3-8B's down projection at B = 16 fits six 12,288-wide rows; it streamed its weights
//     three times).
//  3. Each warp owns whole groups (or, when the groups are fewer than the warps, a group and
//     every P-th k-block of it) and keeps their sums in registers for the whole pass: tile (g, kb)
//     of the stream is two mma.m16n8k16 (16 weight rows x 8 tokens x 32 columns) per 8 tokens.
//  4. At the end of a pass each warp leaves its sums in its shared-memory slots; the block adds
//     the slots of each group in a fixed order (the results do not depend on timing) and writes
//     each (token, output) as the task's GemvOutput says.
//  5. A block type may take wider passes (its kPassSets, tile_body.h): up to kPassSets sets of 16
//     tokens, whose sums the registers and the slots hold together, so that a step of up to
//     16 x kPassSets tokens streams each weight once. Every token's sums are added in the same
//     order as in passes of 16: the outputs are the same bit for bit. The megakernel compiles
//     such a block into an entry of its own (cuda_launch.cuh), which the steps of more than 16
//     tokens take: in the entry of every step its registers would make ptxas spill across the
//     whole megakernel (bench/README.md, "GEMV passes of 64 tokens").
//     Such a block's slots, kPassSets times as large, lie in the stage's memory rather than
//     beside it (gemv_slots_in_stage): a warp stores its sums after a block barrier that follows
//     every warp's last read of the stage, and a later round restages. Beside the stage they
//     would leave Qwen3-8B's gate/up tiles at 64 tokens a fifth of their room to stage in.
// On the host (a block of one thread) the same staging, stream and slots run with a scalar
// multiply, the one thread playing the GPU block's warps in turn, so the CPU tests cover how the
// work is dealt out and added back up.

#include <algorithm>
#include <stdexcept>
#include <vector>

#include "kernels/block_scratch.h"
#include "kernels/llm/warp_ops.h"
#include "kernels/llm/weight_tiles.h"
#include "kernels/weight_stream.h"

namespace evt::kernels::llm {

static_assert(kTileBytes == kStreamTileBytes, "the stream moves whole weight tiles");

inline constexpr int kPassTokens = 16;       // tokens one pass multiplies: two 8-token MMA column tiles
inline constexpr int kMaxGroupsPerWarp = 2;  // so a tile may hold up to 2 x warps groups
inline constexpr int kMaxWarps = 32;         // of a 1024-thread block: the norm's partial sums
// The warps the host's one thread plays: the GPU decode block's (decode_config.h).
inline constexpr int kHostWarps = 11;

// The 16-token sets a pass may take on `Block`: its kPassSets, or 1.
template <class Block>
EVT_HD constexpr int gemv_pass_sets() {
  if constexpr (requires { Block::kPassSets; }) {
    return Block::kPassSets;
  } else {
    return 1;
  }
}

template <class Block>
EVT_HD int gemv_warps(const Block& b) {
#if defined(__CUDA_ARCH__)
  return warps(b);
#else
  (void)b;
  return kHostWarps;
#endif
}

struct GemvInput {
  // Token t's row starts at x + t * ld, or at x + rows[t] * ld: floats, or with bf16 set the input
  // already rounded to bf16 by its producer, as staging would round it, at half the bytes each
  // tile reads from L2. A normed input is bf16: the residual stream, which every block of a normed
  // projection reads whole at once (gemv_run). One pointer either way: the task stays in
  // registers through the pass.
  const void* x = nullptr;
  bool bf16 = false;
  int64_t ld = 0;
  int64_t tokens = 0;
  const int32_t* rows = nullptr;
  // Fused RMSNorm: null for none. Otherwise each row is scaled by 1 / sqrt(mean(row^2) + eps)
  // over its first norm_len values and each column k by norm_w[k].
  const uint16_t* norm_w = nullptr;
  int64_t norm_len = 0;
  float eps = 0;

  EVT_HD int64_t row_start(int64_t t) const { return (rows != nullptr ? rows[t] : t) * ld; }
  EVT_HD const float* row(int64_t t) const { return static_cast<const float*>(x) + row_start(t); }
  EVT_HD const uint16_t* row_bf16(int64_t t) const { return static_cast<const uint16_t*>(x) + row_start(t); }
};

// Where a tile's outputs go: out[t * ld + n] = residual[t * ld + n] + scale[t] * f(v), f(v) = v[0]
// for one matrix and silu(v[0]) * v[1] for two (gate and up); residual and scale are optional.
// One form for every projection's epilogue, so that a task is plain data (GemvTask). With bf16
// set, out holds bf16 and each value is rounded: for a projection whose consumer stages it, and
// for the residual stream, which is bf16 (the residual, when given, is that stream).
struct GemvOutput {
  void* out = nullptr;
  bool bf16 = false;
  int64_t ld = 0;
  const uint16_t* residual = nullptr;
  const float* token_scale = nullptr;
};

// One tile's GEMV, built once by a tile function and handed to gemv_run (in its body) and
// gemv_stream (its weight stream), so that both see the same tiles. matrices = 1: output n is row
// n of the matrix. matrices = 2: the matrix holds two matrices in each 16-row group (gate and up,
// weight_tiles.h), output n is row n % 8 of group n / 8 in each, and the output gets both dots.
// Plain data rather than a template on the epilogue: the megakernel builds every projection's
// task and then runs them all through one copy of gemv_run (TileFunction::device_task), whose
// code then stays in the SM's instruction cache from one projection to the next.
struct GemvTask {
  int matrices = 1;
  GemvInput in;
  const uint16_t* w = nullptr;  // the tiled matrix
  TiledShape shape;             // its tile grid and row panels
  int64_t g0 = 0, groups = 0;   // this tile's, all in one row panel
  int64_t k0 = 0, k1 = 0;       // columns; k0 a multiple of kTileCols, k1 - k0 of 8
  int64_t outputs = 0;          // outputs at or past this are not written
  GemvOutput out;
  // Rounds > 1: the tile is `rounds` whole row panels of `groups` groups, every column, multiplied
  // one after another with one staging of the input: round r has the groups [g0 + r groups,
  // + groups) that the matrix has. For a tile too tall for the warps' registers (the LM head's, a
  // worker's share of the vocabulary), so that its task pays the wait, the norm and the staging,
  // the hand-off and the notification once rather than once per panel.
  int64_t rounds = 1;

  EVT_HD bool empty() const { return groups <= 0 || in.tokens <= 0; }
  EVT_HD int64_t round_g0(int64_t r) const { return g0 + r * groups; }
  EVT_HD int64_t round_groups(int64_t r) const {
    return rounds == 1 ? groups : min_of(groups, shape.groups - round_g0(r));
  }
};

// How a tile's work is laid out in scratch and over the warps; every thread computes the same.
struct GemvPlan {
  int warps;            // W
  int per_group;        // P: warps sharing one group (1 when groups > W)
  int groups_per_warp;  // Q: groups one warp owns (1 unless groups > W)
  int64_t kblocks;      // 32-column blocks of [k0, k1)
  int64_t seg_kblocks;  // k-blocks staged at a time (a segment): all of them when they fit
  int64_t stride;       // staged row length, elements (staged_row of a segment)
  int64_t pass_tokens;  // tokens staged per pass
  int64_t passes;
  double* red;          // kMaxWarps sum-of-squares partials per set of a pass
  double* scale;        // kPassTokens RMSNorm scales per set
  int slot_stride;      // floats from one row of a slot to the next (gemv_slot_stride)
  float* slots;         // W x Q x kTileRows x slot_stride (at the stage: gemv_slots_in_stage)
  uint16_t* stage;      // pass_tokens x stride bf16
};

inline constexpr int64_t kGemvHeaderBytes = (kMaxWarps + kPassTokens) * 8;  // per set of a pass

// Whether a block of passes of `sets` sets keeps its slots in the stage's memory (point 5 above).
// Passes of 16 keep them beside it: their slots are small, and the barrier before the stores and
// the restaging of a later round would be code in the entry that every step runs.
EVT_HD constexpr bool gemv_slots_in_stage(int sets) { return sets > 1; }

// The length of a staged row for `kblocks` column blocks, in elements: one more block when that
// puts rows 64 bytes apart modulo 128, so that the 8 lanes of a quarter warp loading 16 bytes of
// tokens g, g + 1 hit distinct banks.
EVT_HD constexpr int64_t staged_row(int64_t kblocks) { return kblocks * kTileCols + (kblocks % 2 == 0 ? kTileCols : 0); }

EVT_HD constexpr int gemv_groups_per_warp(int64_t groups, int warps) {
  return groups <= warps ? 1 : static_cast<int>((groups + warps - 1) / warps);
}
// The floats from one row of a slot (one warp's sums for one group) to the next: a token's sum
// per set of 16 a pass may take, and in wider passes one more. The epilogue's lanes read one
// token's sums of consecutive rows; rows 64 floats apart put all 32 on one bank, and at B = 64
// those loads were a quarter of the megakernel's shared-memory wavefronts (Nsight Compute,
// Qwen3-8B). Passes of 16 keep 16: padded, their 16-way conflicts gone, Qwen3-8B's and 1.7B's
// steps at B = 1 took 0.3-0.6% longer (bench/README.md, "Where the larger steps' GEMV time went").
EVT_HD constexpr int gemv_slot_stride(int sets) { return sets > 1 ? kPassTokens * sets + 1 : kPassTokens; }
EVT_HD constexpr int64_t gemv_slot_bytes(int64_t groups, int warps, int sets = 1) {
  return int64_t{warps} * gemv_groups_per_warp(groups, warps) * kTileRows * gemv_slot_stride(sets) * 4;
}
// The header, then the slots and the stage: one after the other, or in the same memory.
EVT_HD constexpr int64_t gemv_layout_bytes(int64_t stage_bytes, int64_t groups, int warps, int sets) {
  const int64_t slots = gemv_slot_bytes(groups, warps, sets);
  return kGemvHeaderBytes * sets + (gemv_slots_in_stage(sets) ? max_of(slots, stage_bytes) : slots + stage_bytes);
}
// The scratch a tile of `groups` groups over `k` columns uses with every token of a pass
// staged in one segment, and the least it runs in (one token, one k-block a segment), on a block
// whose passes take up to `sets` sets of 16 tokens.
EVT_HD constexpr int64_t gemv_scratch_bytes(int64_t k, int64_t groups, int64_t tokens, int warps, int sets = 1) {
  const int64_t staged = tokens < kPassTokens * sets ? tokens : kPassTokens * sets;
  return gemv_layout_bytes(staged * staged_row((k + kTileCols - 1) / kTileCols) * 2, groups, warps, sets);
}
EVT_HD constexpr int64_t gemv_min_scratch(int64_t groups, int warps, int sets = 1) {
  return gemv_layout_bytes(staged_row(1) * 2, groups, warps, sets);
}

// How `groups` groups are dealt to the plan's warps: P warps a group, or Q groups a warp.
EVT_HD inline void deal_groups(GemvPlan& p, int64_t groups) {
  p.groups_per_warp = gemv_groups_per_warp(groups, p.warps);
  p.per_group = groups <= p.warps ? p.warps / static_cast<int>(max_of<int64_t>(groups, 1)) : 1;
}

// How a pass of up to `sets` sets of 16 tokens stages its input in `room` bytes of stage: every
// token of a pass staged, k-blocks in segments of what then fits (the padding of staged_row comes
// with an even count: one block fewer is odd and has none); fewer tokens only if a pass's tokens
// do not fit one k-block each.
struct GemvStaging {
  int64_t pass_tokens;
  int64_t seg_kblocks;
};
EVT_HD constexpr GemvStaging gemv_staging(int64_t kblocks, int64_t tokens, int64_t room, int sets = 1) {
  GemvStaging st{};
  st.pass_tokens =
      max_of<int64_t>(1, min_of<int64_t>(min_of<int64_t>(kPassTokens * sets, tokens), room / (staged_row(1) * 2)));
  int64_t seg = min_of<int64_t>(kblocks, room / (st.pass_tokens * kTileCols * 2));
  if (seg > 1 && st.pass_tokens * staged_row(seg) * 2 > room) --seg;
  st.seg_kblocks = max_of<int64_t>(1, seg);
  return st;
}
EVT_HD constexpr int64_t gemv_stage_room(int64_t scratch_bytes, int64_t groups, int warps, int sets = 1) {
  const int64_t slots = gemv_slots_in_stage(sets) ? 0 : gemv_slot_bytes(groups, warps, sets);
  return scratch_bytes - kGemvHeaderBytes * sets - slots;
}
// The segments a pass of a tile of `groups` groups over `k` columns stages its input in, with
// `scratch_bytes` of scratch, on a block of `sets`: the pass stops to restage before each but the
// first. For planning a step's scratch (model/decode_plan.cc).
EVT_HD constexpr int64_t gemv_segments(int64_t k, int64_t groups, int64_t tokens, int warps, int64_t scratch_bytes,
                                       int sets = 1) {
  const int64_t kblocks = (k + kTileCols - 1) / kTileCols;
  const GemvStaging st = gemv_staging(kblocks, tokens, gemv_stage_room(scratch_bytes, groups, warps, sets), sets);
  return (kblocks + st.seg_kblocks - 1) / st.seg_kblocks;
}

// The slot where warp-slot (w, q) leaves its sums: kTileRows rows, p.slot_stride floats apart.
EVT_HD inline float* gemv_slot(const GemvPlan& p, int w, int q) {
  return p.slots + (int64_t{w} * p.groups_per_warp + q) * kTileRows * p.slot_stride;
}

template <class Block>
EVT_HD GemvPlan gemv_plan(const Block& b, const GemvTask& j) {
  constexpr int kSets = gemv_pass_sets<Block>();
  const Scratch s = b.scratch();
  GemvPlan p;
  p.warps = gemv_warps(b);
  deal_groups(p, j.groups);
  p.kblocks = (j.k1 - j.k0 + kTileCols - 1) / kTileCols;
  const GemvStaging st =
      gemv_staging(p.kblocks, j.in.tokens, gemv_stage_room(s.bytes, j.groups, p.warps, kSets), kSets);
  p.pass_tokens = st.pass_tokens;
  p.seg_kblocks = st.seg_kblocks;
  p.stride = staged_row(p.seg_kblocks);
  p.passes = (j.in.tokens + p.pass_tokens - 1) / p.pass_tokens;
  p.red = reinterpret_cast<double*>(s.data);
  p.scale = p.red + kMaxWarps * kSets;
  p.slot_stride = gemv_slot_stride(kSets);
  p.slots = reinterpret_cast<float*>(p.scale + kPassTokens * kSets);
  p.stage = reinterpret_cast<uint16_t*>(gemv_slots_in_stage(kSets) ? p.slots : gemv_slot(p, p.warps, 0));
  return p;
}

// The tile's weight stream: its groups over its k-blocks, once per pass, within its row panel
// (none for an empty task).
template <class Block>
EVT_HD WeightStream gemv_stream(const Block& b, const GemvTask& j) {
  if (j.empty()) return WeightStream{};
  const GemvPlan p = gemv_plan(b, j);
  const int64_t first = j.shape.panel_first(j.g0);
  WeightStream s;
  s.base = reinterpret_cast<const unsigned char*>(j.w) + first * j.shape.kblocks * kTileBytes;
  s.stride = j.shape.panel_width(j.g0);
  s.g0 = j.g0 - first;
  s.groups = j.groups;
  s.kb0 = j.k0 / kTileCols;
  s.kblocks = p.kblocks;
  s.passes = p.passes;
  s.rounds = j.rounds;
  s.last_groups = j.round_groups(j.rounds - 1);
  return s;
}

// A thread's places (row, col) in rows of `cols` places, rows after rows: place i = row cols +
// col for i = first, first + step, ... Each step adds to both rather than dividing i: a 32-bit
// division is ~20 instructions, and in the copy loop of a bf16 segment it was about 40% of them
// (Nsight Compute, Qwen3-8B at B = 64).
struct RowWalk {
  int32_t row, col;
  EVT_HD RowWalk(int32_t first, int32_t step, int32_t cols)
      : row(first / cols), col(first % cols), drow_(step / cols), dcol_(step % cols), cols_(cols) {}
  EVT_HD void next() {
    row += drow_;
    col += dcol_;
    if (col >= cols_) col -= cols_, ++row;
  }

 private:
  int32_t drow_, dcol_, cols_;
};

// Stages tokens [c0, c0 + count) of the input, the segment of columns [k, k + p.seg_kblocks * 32)
// (k a multiple of 32, past k1 zeroed), as bf16(x * norm_w) (the norm's scale multiplies the
// dots: stage_pass), bf16(x) without a norm, or a bf16 input as it is. Ends with a block barrier.
//
// A bf16 input without a norm is copied, by copies that pass no registers (copy16_to_shared),
// every one of a thread's issued before it waits. A normed or float input goes through registers,
// and its loads went out about one round trip per octet (ptxas does not overlap a loop's
// iterations): at B = 16, 11 octets a thread took 5 us to stage 0.6B's o_proj input (128 KiB);
// more octets' loads a round made ptxas spill, and halving the bytes alone changed nothing (that
// was an unnormed float input's staging; see stage_pass for the normed rows). The copies run in a loop
// of their own: one loop for both inputs, choosing per octet, measured 1-2% slower on every dense
// row (bench/results/stage_one_loop_ab_h200_rejected.json).
template <class Block>
EVT_HD void stage_segment(const Block& b, const GemvInput& in, const GemvPlan& p, int64_t c0, int64_t count, int64_t k,
                          int64_t k1) {
  // 32-bit indices: a 64-bit division is a subroutine call on the GPU.
  const auto octets = static_cast<int32_t>(p.seg_kblocks * kTileCols / 8);
  if (in.bf16 && in.norm_w == nullptr) {
    for (RowWalk i(b.thread(), b.threads(), octets); i.row < count; i.next()) {
      const int32_t t = i.row;
      const int64_t col = k + 8 * i.col;
      copy16_to_shared(p.stage + t * p.stride + (col - k), in.row_bf16(c0 + t) + min_of(col, k1 - 8), col < k1);
    }
    copy16_wait_all();
    b.sync();
    return;
  }
  // Through registers: a normed input (bf16) times the norm's weight, or a float input (never
  // normed). One loop for both: a loop each made ptxas spill across the entry.
  for (RowWalk i(b.thread(), b.threads(), octets); i.row < count; i.next()) {
    const int32_t t = i.row;
    const int64_t col = k + 8 * i.col;
    float v[8] = {};
    if (col < k1) {
      if (in.bf16) {
        float g[8];
        load8_bf16(in.row_bf16(c0 + t) + col, v);
        load8_bf16(in.norm_w + col, g);
        for (int j = 0; j < 8; ++j) v[j] *= g[j];
      } else {
        load8_f32(in.row(c0 + t) + col, v);
      }
    }
    store_bf16x8(p.stage + t * p.stride + (col - k), v);
  }
  b.sync();
}

// Stages a pass's first segment, as stage_segment does. With a norm, each row's sum of squares is
// taken on the way: every value of the row is loaded once, squared, and staged when it falls in
// the segment, so a normed tile reads its input in one phase rather than two (the sums, then the
// scaled values after a barrier). The RMSNorm scale then multiplies the dots instead of the
// staged values: bf16(x * w) . W * scale, where Hugging Face rounds x * scale * w (one rounding of
// the input either way). After the block barrier it ends with, threads t < count compute
// p.scale[t], in double as the references do, which the epilogue reads after the pass's barrier.
//
// Every block of the projection reads the same rows at the same moment, so at B >= 16 the L2's
// throughput bounds this phase as much as a thread's round trips: 132 blocks reading 16 rows of
// 4096 floats (8B's B = 16) took 7.7 us with one octet's loads in flight a lane and 7.5 with two;
// the same rows in bf16 took 5.2 and 3.5 (bench/micro/shared_rows_micro.cu). Hence the residual
// stream in bf16, and a lane's octets two at a time, their norm weights with them: the weights'
// loads, issued once the values were used, were a round trip of their own per octet.
template <class Block>
EVT_HD void stage_pass(const Block& b, const GemvInput& in, const GemvPlan& p, int64_t c0, int64_t count, int64_t k0,
                       int64_t k1) {
  if (in.norm_w == nullptr) {
    stage_segment(b, in, p, c0, count, k0, k1);
    return;
  }
  constexpr int kSets = gemv_pass_sets<Block>();
  const int64_t seg_end = min_of<int64_t>(k1, k0 + p.seg_kblocks * kTileCols);
  // Each row in parts, a warp's lanes over adjacent octets of one part: a part per warp when the
  // tokens are no more than the warps, else two parts a row (so that 16 rows are 32 parts rather
  // than 16 rows over the decode block's 11 warps, 5 of which would take two whole rows). A wider
  // pass parts each set of 16 tokens as a pass of those tokens alone would, so that a row's
  // squares are added in the same order at any pass width.
  const auto set_tokens = [&](int64_t set) {
    return kSets == 1 ? count : min_of<int64_t>(kPassTokens, count - set * kPassTokens);
  };
  const auto parts_of = [&](int64_t n) { return static_cast<int32_t>(n <= warps(b) ? warps(b) / n : kMaxWarps / n); };
  EVT_NO_UNROLL  // one copy of the loop: four took 2,500 more instructions in the wide entry
  for (int set = 0; set < kSets; ++set) {
    const int64_t t0 = set * kPassTokens, n = set_tokens(set);
    if (kSets > 1 && n <= 0) break;
    const int32_t parts = parts_of(n);
    const int64_t per = ((in.norm_len + parts - 1) / parts + 7) / 8 * 8;
    for (int32_t i = warp(b); i < n * parts; i += warps(b)) {
      const uint16_t* row = in.row_bf16(c0 + t0 + i / parts);
      uint16_t* staged = p.stage + (t0 + i / parts) * p.stride - k0;  // column c at staged[c]
      const int64_t s1 = min_of<int64_t>(in.norm_len, (i % parts + 1) * per), step = 8 * lanes();
      double sum = 0;
      for (int64_t col = (i % parts) * per + 8 * lane(b); col < s1; col += 2 * step) {
        // Two octets' loads, the values and the norm's weights, before either is used: one round
        // trip for the four. (A load of the next octet at the top of each iteration did not
        // help: ptxas moved it into the current octet's registers at the iteration's end, which
        // waited for it. An unconditional weights' load it sank to their use.) A second octet
        // past the part loads nothing, and its zeros add nothing.
        const auto staged_at = [&](int64_t c) { return c < s1 && c >= k0 && c < seg_end; };
        Bf16x8 x[2] = {load_bf16x8(row + col), {}}, w[2] = {};
        if (staged_at(col)) w[0] = load_bf16x8(in.norm_w + col);
        if (col + step < s1) x[1] = load_bf16x8(row + col + step);
        if (staged_at(col + step)) w[1] = load_bf16x8(in.norm_w + col + step);
        EVT_UNROLL
        for (int h = 0; h < 2; ++h) {
          const int64_t c = col + h * step;
          float v[8], g[8];
          unpack8_bf16(x[h], v);
          unpack8_bf16(w[h], g);
          for (int j = 0; j < 8; ++j) sum += static_cast<double>(v[j]) * v[j];
          if (staged_at(c)) {
            for (int j = 0; j < 8; ++j) v[j] *= g[j];
            store_bf16x8(staged + c, v);
          }
        }
      }
      sum = warp_sum(sum);
      if (lane(b) == 0) p.red[set * kMaxWarps + i] = sum;
    }
  }
  // The segment's columns from k1 on are zeros.
  const auto tail = static_cast<int32_t>((k0 + p.seg_kblocks * kTileCols - seg_end) / 8);  // octets
  for (int32_t i = b.thread(); i < count * tail; i += b.threads()) {
    const float zeros[8] = {};
    store_bf16x8(p.stage + (i / tail) * p.stride + (seg_end - k0) + 8 * (i % tail), zeros);
  }
  b.sync();
  for (int64_t t = b.thread(); t < count; t += b.threads()) {
    const int64_t set = kSets == 1 ? 0 : t / kPassTokens;
    const int32_t parts = parts_of(set_tokens(set));
    const double* red = p.red + set * kMaxWarps + (t - set * kPassTokens) * parts;
    double sum = 0;
    for (int32_t j = 0; j < parts; ++j) sum += red[j];
    p.scale[t] = 1.0 / sqrt(sum / static_cast<double>(in.norm_len) + in.eps);
  }
}

// The tiles of a pass one warp multiplies, in stream order (k-block-major over the job's
// groups): with the groups no more than the warps, every P-th k-block of group w % G (starting at
// k-block w / G), so tile index w, w + P G, ...; otherwise every k-block of groups w and w + W.
// take(hi, fn) calls fn(i, kb, q) for each of them below hi, q naming which of the warp's groups
// it belongs to; then the next call goes on from there. No division: the GPU calls it per chunk.
class WarpTiles {
 public:
  EVT_HD WarpTiles(const GemvPlan& p, int64_t groups, int w) {
    const auto g = static_cast<int32_t>(groups);
    if (g <= p.warps) {
      next_[0] = w < p.per_group * g ? w : kNone;
      kb_[0] = w / g;
      step_ = p.per_group * g;
      kb_step_ = p.per_group;
    } else {
      for (int q = 0; q < kMaxGroupsPerWarp; ++q) next_[q] = w + q * p.warps < g ? w + q * p.warps : kNone;
      step_ = g;
      kb_step_ = 1;
    }
  }
  template <class Fn>
  EVT_HD void take(int32_t hi, Fn&& fn) {
    EVT_UNROLL
    for (int q = 0; q < kMaxGroupsPerWarp; ++q) {
      for (; next_[q] < hi; next_[q] += step_, kb_[q] += kb_step_) fn(next_[q], kb_[q], q);
    }
  }

 private:
  static constexpr int32_t kNone = 0x7fffffff;
  int32_t next_[kMaxGroupsPerWarp] = {kNone, kNone}, kb_[kMaxGroupsPerWarp] = {};
  int32_t step_ = 0, kb_step_ = 0;
};

// The stage's segments along a pass's stream, whose tiles are k-block-major over the job's
// groups: the staged segment starts at k-block kb0 and ends before tile `end`. next() moves to the
// following segment once the caller restaged it.
class Segments {
 public:
  EVT_HD Segments(const GemvPlan& p, int64_t groups, int32_t tiles_per_pass)
      : step_(static_cast<int32_t>(p.seg_kblocks * groups)),
        kb_step_(static_cast<int32_t>(p.seg_kblocks)),
        tiles_(tiles_per_pass),
        end_(min_of<int32_t>(step_, tiles_per_pass)) {}
  EVT_HD int32_t kb0() const { return kb0_; }
  // The first tile past the staged segment, when it falls before `hi`: the stage must be refilled
  // before the tiles from there on.
  EVT_HD bool ends_before(int32_t hi) const { return end_ < hi; }
  EVT_HD int32_t end() const { return end_; }
  EVT_HD void next() {
    kb0_ += kb_step_;
    end_ = min_of<int32_t>(end_ + step_, tiles_);
  }

 private:
  int32_t step_, kb_step_, tiles_, end_, kb0_ = 0;
};

#if defined(__CUDA_ARCH__)
// One weight tile (k-block kb of the pass) times kNT 8-token column tiles of the staged
// activations: lane (g, c) reads its A registers of both MMAs from the tile's two halves and
// columns 8c .. 8c+7 of token g's staged row, the B registers of both (weight_tiles.h).
template <int kNT>
__device__ inline void mma_tile(const unsigned char* tile, const uint16_t* const (&x)[kNT], int64_t kb,
                                float (&acc)[kNT][4]) {
  const int lane = threadIdx.x % 32;
  const uint4 a0 = *reinterpret_cast<const uint4*>(tile + lane * 16);
  const uint4 a1 = *reinterpret_cast<const uint4*>(tile + kTileBytes / 2 + lane * 16);
  EVT_UNROLL
  for (int nt = 0; nt < kNT; ++nt) {
    const uint4 xv = *reinterpret_cast<const uint4*>(x[nt] + kb * kTileCols);
    mma_bf16(acc[nt], a0.x, a0.y, a0.z, a0.w, xv.x, xv.y);
    mma_bf16(acc[nt], a1.x, a1.y, a1.z, a1.w, xv.z, xv.w);
  }
}

// A warp's share of one pass over `groups` groups (one round of it: gemv_run): every chunk from
// the reader, its tiles into registers, then its sums into its slots. restage(kb) refills the
// stage with the segment from k-block kb; every warp calls it at the same tile of the stream, as
// every warp reads every chunk. settle() comes between the last tile and the stores: a block
// barrier where the slots lie in the stage. kNT 8-token column tiles: kNT / 2 sets of 16 tokens,
// or one of 8.
template <int kNT, class Reader, class Restage, class Settle>
__device__ void gemv_pass_warp(const GemvPlan& p, int64_t groups, int64_t count, int32_t tiles_per_pass,
                               Reader& reader, Restage&& restage, Settle&& settle) {
  const int w = static_cast<int>(threadIdx.x / 32), lane = static_cast<int>(threadIdx.x % 32);
  const int g = lane / 4, c = lane % 4;
  const uint16_t* x[kNT];
  EVT_UNROLL
  for (int nt = 0; nt < kNT; ++nt) x[nt] = p.stage + min_of<int64_t>(nt * 8 + g, count - 1) * p.stride + 8 * c;
  float acc0[kNT][4] = {}, acc1[kNT][4] = {};
  WarpTiles mine(p, groups, w);
  Segments seg(p, groups, tiles_per_pass);
  for (int32_t lo = 0; lo < tiles_per_pass; lo += kChunkTiles) {
    const unsigned char* tiles = reader.acquire();
    const auto mma = [&](int32_t i, int32_t kb, int q) {
      if (q == 0) {
        mma_tile<kNT>(tiles + (i - lo) * kTileBytes, x, kb - seg.kb0(), acc0);
      } else {
        mma_tile<kNT>(tiles + (i - lo) * kTileBytes, x, kb - seg.kb0(), acc1);
      }
    };
    const int32_t hi = min_of<int32_t>(lo + kChunkTiles, tiles_per_pass);
    while (seg.ends_before(hi)) {
      mine.take(seg.end(), mma);
      seg.next();
      restage(seg.kb0());
    }
    mine.take(hi, mma);
    reader.release();
  }
  // Each accumulator by name: picking one at run time would make ptxas keep both in local memory,
  // which it then stored to after every chunk (twice the pass's time on 8B at B = 16).
  const auto store = [&](int q, const float (&acc)[kNT][4]) {
    float* slot = gemv_slot(p, w, q);
    EVT_UNROLL
    for (int nt = 0; nt < kNT; ++nt) {
      const int col = nt * 8 + 2 * c;
      slot[g * p.slot_stride + col] = acc[nt][0];
      slot[g * p.slot_stride + col + 1] = acc[nt][1];
      slot[(g + 8) * p.slot_stride + col] = acc[nt][2];
      slot[(g + 8) * p.slot_stride + col + 1] = acc[nt][3];
    }
  };
  settle();
  store(0, acc0);
  if (p.groups_per_warp > 1) store(1, acc1);
}

// The pass of the fewest column tiles that hold `count` tokens: 8, 16, or up to kSets sets of 16.
template <int kSets, class Reader, class Restage, class Settle>
__device__ void gemv_pass(const GemvPlan& p, int64_t groups, int64_t count, int32_t tiles_per_pass, Reader& reader,
                          Restage&& restage, Settle&& settle) {
  if constexpr (kSets > 1) {
    if (count > kSets / 2 * kPassTokens) {
      gemv_pass_warp<2 * kSets>(p, groups, count, tiles_per_pass, reader, restage, settle);
    } else {
      gemv_pass<kSets / 2>(p, groups, count, tiles_per_pass, reader, restage, settle);
    }
  } else if (count > 8) {
    gemv_pass_warp<2>(p, groups, count, tiles_per_pass, reader, restage, settle);
  } else {
    gemv_pass_warp<1>(p, groups, count, tiles_per_pass, reader, restage, settle);
  }
}
#endif

// The same on the host: the one thread plays each warp in turn, chunk by chunk (segment by
// segment within a chunk), with a scalar multiply in float, adding into sums that play the
// registers and go to the slots at the pass's end (which may lie in the stage).
template <class Reader, class Restage>
inline void gemv_pass_host(const GemvPlan& p, int64_t groups, int64_t count, int32_t tiles_per_pass, Reader& reader,
                           Restage&& restage) {
  std::vector<float> sums(static_cast<size_t>(gemv_slot(p, p.warps, 0) - p.slots), 0.0f);
  std::vector<WarpTiles> warps;
  for (int w = 0; w < p.warps; ++w) warps.emplace_back(p, groups, w);
  Segments seg(p, groups, tiles_per_pass);
  for (int32_t lo = 0; lo < tiles_per_pass; lo += kChunkTiles) {
    const unsigned char* tiles = reader.acquire();
    const auto every_warp = [&](int32_t end) {
      for (int w = 0; w < p.warps; ++w) {
        warps[w].take(end, [&](int32_t i, int32_t kb, int q) {
          const auto* tile = reinterpret_cast<const uint16_t*>(tiles + (i - lo) * kTileBytes);
          float* slot = sums.data() + (gemv_slot(p, w, q) - p.slots);
          for (int r = 0; r < kTileRows; ++r) {
            for (int64_t t = 0; t < count; ++t) {
              const uint16_t* x = p.stage + t * p.stride + (kb - seg.kb0()) * kTileCols;
              float sum = 0;
              for (int j = 0; j < kTileCols; ++j) sum += bf16_to_f32(tile[tile_element(r, j)]) * bf16_to_f32(x[j]);
              slot[r * p.slot_stride + t] += sum;
            }
          }
        });
      }
    };
    const int32_t hi = std::min<int32_t>(lo + kChunkTiles, tiles_per_pass);
    while (seg.ends_before(hi)) {
      every_warp(seg.end());
      seg.next();
      restage(seg.kb0());
    }
    every_warp(hi);
    reader.release();
  }
  std::copy(sums.begin(), sums.end(), p.slots);
}

// One output: the dot (or gate and up dots) v of token t, row n, through the task's GemvOutput.
EVT_HD inline void gemv_store(const GemvTask& j, int64_t t, int64_t n, const float* v) {
  float value = j.matrices == 2 ? silu(v[0]) * v[1] : v[0];
  if (j.out.token_scale != nullptr) value = j.out.token_scale[t] * value;
  if (j.out.residual != nullptr) value = bf16_to_f32(j.out.residual[t * j.out.ld + n]) + value;
  if (j.out.bf16) {
    static_cast<uint16_t*>(j.out.out)[t * j.out.ld + n] = f32_to_bf16(value);
  } else {
    static_cast<float*>(j.out.out)[t * j.out.ld + n] = value;
  }
}

// The tile: every pass stages its tokens, streams the weights once (round by round), and writes
// each (token, output) (an empty column range gives zeros); an empty task does nothing. The
// weights must be the stream gemv_stream(b, j) describes; the scratch at least
// gemv_min_scratch(groups, warps). It ends without a block barrier after its last pass: a caller
// that reads the outputs or reuses the scratch syncs first (the megakernel does after every body),
// so that a task pays one, not two.
template <class Block>
EVT_HD void gemv_run(const Block& b, const GemvTask& j) {
  static_assert(kTileRows == 16, "a group holds 16 outputs of one matrix or 8 of two");
  constexpr int kSets = gemv_pass_sets<Block>();
  static_assert(kSets == 1 || kSets == 2 || kSets == 4, "a pass takes one, two or four sets of 16 tokens");
  if (j.empty()) return;
  const int outs_log2 = j.matrices == 2 ? 3 : 4, outs = 1 << outs_log2;  // kTileRows / matrices
  const GemvPlan p = gemv_plan(b, j);
#if !defined(__CUDA_ARCH__)
  if (j.matrices != 1 && j.matrices != 2) throw std::logic_error("gemv: a task multiplies one matrix or two");
  if (!j.in.bf16 && j.in.norm_w != nullptr) {
    throw std::logic_error("gemv: a normed input is bf16 (the residual stream; stage_pass reads it so)");
  }
  if (j.in.norm_w != nullptr && j.k1 > j.in.norm_len) {
    throw std::logic_error("gemv: a normed tile's columns lie within the normed row (stage_pass stages them)");
  }
  if (j.rounds < 1 || j.round_groups(j.rounds - 1) <= 0) {
    throw std::logic_error("gemv: a task has at least one round, and its last round has groups");
  }
  if (j.rounds > 1 && (j.g0 % j.shape.panel != 0 || j.groups != j.shape.panel || j.k0 != 0 ||
                       p.kblocks != j.shape.kblocks)) {
    throw std::logic_error("gemv: a task of several rounds reads whole row panels, every column of each");
  }
  if (j.g0 + j.groups > j.shape.panel_first(j.g0) + j.shape.panel_width(j.g0)) {
    throw std::logic_error("gemv: the tile's row groups straddle two panels of the weight layout");
  }
  if (j.groups > int64_t{kMaxGroupsPerWarp} * p.warps) {
    throw std::logic_error("gemv: the tile has more row groups than its warps hold in registers");
  }
  if (b.scratch().bytes < gemv_min_scratch(j.groups, p.warps, kSets)) {
    throw std::logic_error("gemv: the scratch holds no staged k-block beside the tile's slots");
  }
#endif
  const WeightStream s = gemv_stream(b, j);
  auto reader = b.weights(s);
  for (int64_t pass = 0; pass < p.passes; ++pass) {
    const int64_t c0 = pass * p.pass_tokens, count = min_of<int64_t>(p.pass_tokens, j.in.tokens - c0);
    stage_pass(b, j.in, p, c0, count, j.k0, j.k1);
    // A later segment waits until every warp is done with the one before it.
    const auto restage = [&](int64_t kb) {
      b.sync();
      stage_segment(b, j.in, p, c0, count, j.k0 + kb * kTileCols, j.k1);
    };
    for (int64_t r = 0; r < j.rounds; ++r) {
      // A later round reuses the slots, which the previous round's outputs were read from, and
      // starts from the first segment (which slots in the stage have overwritten).
      if (r > 0 && (p.seg_kblocks < p.kblocks || gemv_slots_in_stage(kSets))) {
        restage(0);
      } else if (r > 0) {
        b.sync();
      }
      // A narrower last round is dealt to the warps as a task of its groups alone would be, so
      // that its sums are added in the same order.
      const int64_t g0 = j.round_g0(r), groups = j.round_groups(r);
      const auto tiles = static_cast<int32_t>(groups * p.kblocks);
      GemvPlan pr = p;
      deal_groups(pr, groups);
#if defined(__CUDA_ARCH__)
      gemv_pass<kSets>(pr, groups, count, tiles, reader, restage, [&] {
        if constexpr (gemv_slots_in_stage(kSets)) b.sync();
      });
#else
      gemv_pass_host(pr, groups, count, tiles, reader, restage);
#endif
      b.sync();
      // (token, output) pairs, outputs fastest so that the stores are contiguous: thread i takes
      // pairs i, i + threads, ..., each the token t and the place r in its outputs. Group gi's
      // sums are in the slots of warps gi + u * groups (u < P), or of warp gi - W q (its q-th
      // group, q = gi >= W: the groups are at most 2 W), added in that order.
      const auto per_token = static_cast<int32_t>(groups * outs);
      for (RowWalk i(b.thread(), b.threads(), per_token); i.row < count; i.next()) {
        const int32_t t = i.row, r = i.col;
        const int32_t gi = r >> outs_log2, o = r & (outs - 1);
        const int64_t n = (g0 + gi) * outs + o;
        if (n < j.outputs) {
          // The sums of each matrix (gate, up). The loops run to the constant 2, unrolled, so that
          // v is indexed by constants and stays in registers: looping to j.matrices put it in
          // local memory in the larger entries, a store and a load per slot added (60 of the
          // sm_90a MoE static entry's 207 local accesses; scripts/sass-size with NVDISASM).
          float v[2] = {};
          const int q = groups > pr.warps && gi >= pr.warps ? 1 : 0;
          for (int u = 0; u < pr.per_group; ++u) {
            const int w = groups <= pr.warps ? gi + u * static_cast<int32_t>(groups) : gi - q * pr.warps;
            const float* slot = gemv_slot(pr, w, q);
            EVT_UNROLL
            for (int rr = 0; rr < 2; ++rr) {
              if (rr < j.matrices) v[rr] += slot[(o + rr * outs) * pr.slot_stride + t];
            }
          }
          if (j.in.norm_w != nullptr) {
            EVT_UNROLL
            for (int rr = 0; rr < 2; ++rr) {
              if (rr < j.matrices) v[rr] = static_cast<float>(v[rr] * p.scale[t]);
            }
          }
          gemv_store(j, c0 + t, n, v);
        }
      }
    }
    if (pass + 1 < p.passes) b.sync();  // the next pass reuses the slots and the stage
  }
}

EVT_HD inline GemvTask gemv_task(int matrices, const GemvInput& in, const uint16_t* w, const TiledShape& shape,
                                 int64_t g0, int64_t groups, int64_t k0, int64_t k1, int64_t outputs,
                                 const GemvOutput& out) {
  return GemvTask{matrices, in, w, shape, g0, groups, k0, k1, outputs, out};
}

// out = residual + x W^T over the 16-row groups [g0, g0 + groups) of W (rows x k, tiled in panels
// of panel_rows rows): the projections that end the attention and MLP blocks. x is tokens x k
// bf16 (row stride k), rounded by its producer; residual and out are tokens x rows of the
// residual stream, bf16, each sum rounded once.
EVT_HD inline GemvTask residual_task(const uint16_t* x, int64_t tokens, int64_t k, const uint16_t* w, int64_t rows,
                                     int64_t panel_rows, int64_t g0, int64_t groups, const uint16_t* residual,
                                     uint16_t* out) {
  return gemv_task(1, GemvInput{.x = x, .bf16 = true, .ld = k, .tokens = tokens}, w, tiled_shape(rows, k, panel_rows),
                   g0, groups, 0, k, rows, GemvOutput{.out = out, .bf16 = true, .ld = rows, .residual = residual});
}

}  // namespace evt::kernels::llm
