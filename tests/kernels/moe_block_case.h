#pragma once
// The inputs of the MoE block's tile tests (moe_block_test.cc on the CPU, moe_block_gpu_test.cc on
// the GPU): a two-layer model, layer 0 dense and layer 1 sparse, its weights, every buffer of the
// block by name, and the block's stages in the order the decode graph runs them.

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "kernels/llm/decode_config.h"
#include "kernels/llm/moe_layout.h"
#include "kernels/llm/moe_router.h"
#include "kernels/llm/warp_ops.h"
#include "kernels/llm/weight_tiles.h"
#include "kernels/registry.h"
#include "util/int_math.h"

namespace evt::kernels::llm::testing {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr uint16_t kBf16NaN = 0x7fc0;

// Every buffer of the block by name: f32, bf16 (the residual stream) or i32 values, NaN/-7
// poison, with its shape.
struct Buffers {
  struct Buf {
    std::vector<int64_t> shape;
    std::vector<float> f32;
    std::vector<uint16_t> bf16;
    std::vector<int32_t> i32;
    std::vector<int64_t> i64;
    void* data() {
      return !f32.empty()    ? static_cast<void*>(f32.data())
             : !bf16.empty() ? static_cast<void*>(bf16.data())
             : !i32.empty()  ? static_cast<void*>(i32.data())
                             : static_cast<void*>(i64.data());
    }
    size_t bytes() const { return f32.size() * 4 + bf16.size() * 2 + i32.size() * 4 + i64.size() * 8; }
    BufferView view() {
      int64_t n = 1;
      for (int64_t d : shape) n *= d;
      return BufferView{data(), shape, n};
    }
    // The float values, bf16 ones widened.
    std::vector<float> floats() const {
      std::vector<float> v = f32;
      for (uint16_t x : bf16) v.push_back(bf16_to_f32(x));
      return v;
    }
  };
  std::map<std::string, Buf> all;
  Buf& add(const std::string& name, std::vector<int64_t> shape, char type) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    Buf& b = all[name];
    b.shape = std::move(shape);
    if (type == 'f') b.f32.assign(static_cast<size_t>(n), kNaN);
    if (type == 'b') b.bf16.assign(static_cast<size_t>(n), kBf16NaN);
    if (type == 'i') b.i32.assign(static_cast<size_t>(n), -7);
    if (type == 'l') b.i64.assign(static_cast<size_t>(n), 0);
    return b;
  }
  std::vector<BufferView> views(const std::vector<std::string>& names) {
    std::vector<BufferView> v;
    for (const std::string& n : names) v.push_back(all.at(n).view());
    return v;
  }
  void poison(const std::vector<std::string>& names) {
    for (const std::string& n : names) {
      for (float& x : all.at(n).f32) x = kNaN;
      for (uint16_t& x : all.at(n).bf16) x = kBf16NaN;
      for (int32_t& x : all.at(n).i32) x = -7;
    }
  }
};

// One stage of the block: its registry row, buffers, the tiles of a layer it runs ((l, 0..tiles),
// or (l) when tiles is 0) and how close a body must come to the reference (0: bit for bit).
struct MoeStage {
  const char* row;
  std::vector<std::string> reads, writes;
  int64_t tiles;
  double tol;
};

class MoeBlockCase {
 public:
  static constexpr int64_t kT = 5, kH = 48, kI = 40, kE = 6, kK = 2, kIM = 24, kXK = 2;
  static constexpr int64_t kXI = 40, kMaxGu = 18, kMaxDn = 18, kNH = 3;

  MoeBlockCase() {
    std::mt19937 rng(11);
    std::normal_distribution<float> d(0, 1);
    auto bf16s = [&](int64_t n, float scale) {
      std::vector<uint16_t> v(static_cast<size_t>(n));
      for (uint16_t& x : v) x = f32_to_bf16(scale * d(rng));
      return v;
    };
    // In panels of the tiles cfg sets below (panel_rows; 0: one panel), as decode_weights packs them.
    auto tiled = [](const std::vector<uint16_t>& m, int64_t rows, int64_t cols, int64_t panel_rows, bool gate_up) {
      std::vector<uint16_t> out(static_cast<size_t>(tiled_shape(rows, cols).bytes() / 2));
      pack_tiled(rows, cols, panel_rows, [&](int64_t n) -> const uint16_t* {
        if (!gate_up) return m.data() + n * cols;
        bool up = false;
        const int64_t r = gate_up_source_row(n, up);
        return r < rows / 2 ? m.data() + (r + (up ? rows / 2 : 0)) * cols : nullptr;
      }, out.data());
      return out;
    };
    dense_gate_up = tiled(bf16s(2 * kI * kH, 0.3f), 2 * kI, kH, 16, true);
    dense_down = tiled(bf16s(kH * kI, 0.3f), kH, kI, 16, false);
    router = tiled(bf16s(kE * kH, 2.0f / std::sqrt(float(kH))), kE, kH, 16, false);
    for (int64_t e = 0; e < kE; ++e) {
      const auto gu = tiled(bf16s(2 * kIM * kH, 0.3f), 2 * kIM, kH, 0, true);
      const auto dn = tiled(bf16s(kH * kIM, 0.3f), kH, kIM, 0, false);
      experts_gate_up.insert(experts_gate_up.end(), gu.begin(), gu.end());
      experts_down.insert(experts_down.end(), dn.begin(), dn.end());
    }
    for (int l = 0; l < 2; ++l) {
      norm[l] = bf16s(kH, 0.1f);
      for (uint16_t& w : norm[l]) w = f32_to_bf16(1 + bf16_to_f32(w));
    }
    Buffers::Buf& cfg = b.add("cfg", {kCfgWords}, 'i');
    std::fill(cfg.i32.begin(), cfg.i32.end(), 0);
    cfg.i32[kCfgEpsBits] = std::bit_cast<int32_t>(1e-6f);
    cfg.i32[kCfgRowsH] = 16;  // the dense layer's tiles
    cfg.i32[kCfgRowsI] = 8;
    cfg.i32[kCfgMoeRowsE] = 16;  // the sparse layer's
    cfg.i32[kCfgMoeRowsXI] = 8;
    cfg.i32[kCfgMoeRowsDn] = 16;
    cfg.i32[kCfgMoeDenseInter] = kI;
    cfg.i32[kCfgMoeNormTopk] = 1;
    cfg.i32[kCfgMoeInter] = kIM;
    cfg.i32[kCfgMoeTopK] = kK;
    cfg.i32[kCfgMoeExperts] = kE;
    b.add("wtab", {2, kWeightColumns}, 'l');
    point_wtab(host_addresses());
    add_step_buffers(kT, rng);
  }

  // The buffers of a step of `tokens` tokens (replacing any), poisoned, x_mid random.
  void add_step_buffers(int64_t tokens, std::mt19937& rng) {
    std::normal_distribution<float> d(0, 1);
    const int64_t rows = tokens * kXK;
    Buffers::Buf& x_mid = b.add("x_mid", {tokens, kH}, 'b');
    for (uint16_t& v : x_mid.bf16) v = f32_to_bf16(d(rng));
    b.add("router_logits", {tokens, kE}, 'f');
    b.add("route_ids", {tokens, kXK}, 'i');
    b.add("route_w", {tokens, kXK}, 'f');
    b.add("exp_indptr", {kE + 1}, 'i');
    b.add("perm", {rows}, 'i');
    b.add("sorted_w", {rows}, 'f');
    b.add("pos", {tokens, kXK}, 'i');
    b.add("gu_ptr", {2, kE + 1}, 'i');
    b.add("dn_ptr", {2, kE + 1}, 'i');
    b.add("tile_expert", {2, kMaxGu, kTileEntryWords}, 'i');
    b.add("act_s", {rows, kXI}, 'f');
    b.add("y_s", {rows, kH}, 'f');
    b.add("x", {2, tokens, kH}, 'b');
    // Phase 1's buffers, for the chain comparison.
    b.add("act", {tokens, std::max(kI, kK * kIM)}, 'f');
    b.add("x1", {2, tokens, kH}, 'b');
  }

  static inline const std::vector<std::string> kPlanWrites = {
      "route_ids", "route_w", "exp_indptr", "perm", "sorted_w", "pos", "gu_ptr", "dn_ptr", "tile_expert"};

  std::vector<MoeStage> stages() const {
    // The router's grid as the decode graph binds NR (bind_moe_dims): its tiles of experts for
    // each GEMV pass of the step's tokens.
    const std::vector<int32_t>& cfg = b.all.at("cfg").i32;
    const int64_t passes = ceil_div(b.all.at("x_mid").shape[0], kPassTokens);
    const int64_t router_tiles = router_tiles_per_pass(cfg[kCfgMoeExperts], cfg[kCfgMoeRowsE]) * passes;
    return {
        {"moe_router", {"cfg", "wtab", "x_mid"}, {"router_logits"}, router_tiles, 1e-4},
        // From the same logits: the same experts and weights, bit for bit.
        {"moe_plan", {"cfg", "wtab", "x_mid", "router_logits"}, kPlanWrites, 0, 0},
        {"moe_expert_gate_up", {"cfg", "wtab", "x_mid", "exp_indptr", "perm", "gu_ptr", "tile_expert"}, {"act_s"}, kMaxGu, 1e-4},
        {"moe_expert_down", {"cfg", "wtab", "act_s", "exp_indptr", "sorted_w", "dn_ptr", "tile_expert"}, {"y_s"}, kMaxDn, 1e-4},
        {"moe_combine_residual", {"cfg", "y_s", "pos", "x_mid"}, {"x"}, kNH, 1e-5},
    };
  }

  // The weights, in the order point_wtab takes their addresses.
  std::vector<const std::vector<uint16_t>*> weights() const {
    return {&dense_gate_up, &dense_down, &router, &experts_gate_up, &experts_down, &norm[0], &norm[1]};
  }
  std::vector<int64_t> host_addresses() const {
    std::vector<int64_t> a;
    for (const std::vector<uint16_t>* w : weights()) a.push_back(static_cast<int64_t>(reinterpret_cast<uintptr_t>(w->data())));
    return a;
  }
  // wtab with the weights at `a` (weights() order): host memory, or a device copy.
  void point_wtab(const std::vector<int64_t>& a) {
    std::vector<int64_t>& wtab = b.all.at("wtab").i64;
    std::fill(wtab.begin(), wtab.end(), 0);
    wtab[kWgateUp] = a[0];
    wtab[kWdown] = a[1];
    wtab[kWpostNorm] = a[5];
    wtab[kWeightColumns + kWrouter] = a[2];
    wtab[kWeightColumns + kWexpertsGateUp] = a[3];
    wtab[kWeightColumns + kWexpertsDown] = a[4];
    wtab[kWeightColumns + kWpostNorm] = a[6];
  }

  // The run-time wait counts the stages set (moe_plan's ACTX and DONE), by (set, element).
  struct Counts final : WaitCountSetter {
    std::map<std::pair<size_t, int64_t>, int64_t> set;
    void set_wait_count(size_t set_index, int64_t element, int64_t count) override {
      EXPECT_TRUE(set.emplace(std::pair{set_index, element}, count).second) << "set twice: " << element;
    }
  };

  // Runs `fn` on tiles (l, 0..n), or on tile (l) when n is 0, recording the counts it sets.
  void run(CpuTileFn fn, int64_t l, int64_t n, const std::vector<std::string>& reads,
           const std::vector<std::string>& writes, Counts* counts = nullptr) {
    Counts ignored;
    const std::vector<BufferView> r = b.views(reads), w = b.views(writes);
    for (int64_t i = 0; i < std::max<int64_t>(n, 1); ++i) {
      const int64_t tile[2] = {l, i};
      fn(TileArgs{.tile = std::span<const int64_t>(tile, n == 0 ? 1 : 2), .reads = r, .writes = w,
                  .wait_counts = counts ? counts : &ignored});
    }
  }

  // The reference's outputs of stage s on layer l, from the buffers as they are; they stay in
  // the buffers (the next stage reads them) and come back poisoned-then-written.
  std::map<std::string, Buffers::Buf> run_reference(const MoeStage& s, int64_t l, Counts* counts = nullptr) {
    const TileFunction* fn = Registry::builtins().find(s.row);
    EXPECT_NE(fn, nullptr) << s.row;
    b.poison(s.writes);
    if (fn != nullptr) run(fn->cpu, l, s.tiles, s.reads, s.writes, counts);
    std::map<std::string, Buffers::Buf> out;
    for (const std::string& w : s.writes) out[w] = b.all.at(w);
    return out;
  }

  Buffers b;
  std::vector<uint16_t> dense_gate_up, dense_down, router, experts_gate_up, experts_down, norm[2];
};

// A body's outputs against the reference's: integers exactly; floats exactly or within
// s.tol relative to the reference's magnitude, bf16 ones within a further ulp (body and reference
// round sums that differ in their last bits); what the reference left poisoned, the body too.
inline void expect_outputs_match(const MoeStage& s, const std::map<std::string, Buffers::Buf>& got,
                                 const std::map<std::string, Buffers::Buf>& want) {
  for (const std::string& w : s.writes) {
    const Buffers::Buf &ours_buf = got.at(w), &ref_buf = want.at(w);
    EXPECT_EQ(ours_buf.i32, ref_buf.i32) << w;
    const std::vector<float> ours = ours_buf.floats(), ref = ref_buf.floats();
    const double ulp = ref_buf.bf16.empty() ? 0 : 1.0 / 128;
    for (size_t i = 0; i < ref.size(); ++i) {
      if (std::isnan(ref[i])) {
        EXPECT_TRUE(std::isnan(ours[i])) << w << "[" << i << "] written by the body only";
      } else if (s.tol == 0) {
        ASSERT_EQ(ours[i], ref[i]) << w << "[" << i << "]";
      } else {
        ASSERT_NEAR(ours[i], ref[i], s.tol * (1 + std::fabs(ref[i])) + ulp * std::fabs(ref[i])) << w << "[" << i << "]";
      }
    }
  }
}

}  // namespace evt::kernels::llm::testing
