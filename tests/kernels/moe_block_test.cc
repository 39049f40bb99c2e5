// The MoE block's phase 2 tile functions (docs/moe_decode.md) on a two-layer model, layer 0
// dense and layer 1 sparse: each stage's body (on the host's one-thread block, reading its weight
// stream) against its registry row's reference on the same inputs, outputs poisoned first; the
// bookkeeping and routing bit for bit, the projections within a float tolerance; and the whole
// chain of references against phase 1's moe_gate_up + moe_down, which the MoE fixture ties to
// Hugging Face.

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <limits>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "kernels/llm/decode_config.h"
#include "kernels/llm/moe_combine_residual.h"
#include "kernels/llm/moe_expert_down.h"
#include "kernels/llm/moe_expert_gate_up.h"
#include "kernels/llm/moe_layout.h"
#include "kernels/llm/moe_plan.h"
#include "kernels/llm/moe_router.h"
#include "kernels/llm/moe_topk.h"
#include "kernels/llm/weight_tiles.h"
#include "kernels/registry.h"
#include "kernels/tile_body.h"

namespace evt::kernels::llm {
namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// Every buffer of the block by name: f32 or i32 values, NaN/-7 poison, with its shape.
struct Buffers {
  struct Buf {
    std::vector<int64_t> shape;
    std::vector<float> f32;
    std::vector<int32_t> i32;
    std::vector<int64_t> i64;
    BufferView view() {
      void* data = !f32.empty() ? static_cast<void*>(f32.data())
                   : !i32.empty() ? static_cast<void*>(i32.data())
                                  : static_cast<void*>(i64.data());
      int64_t n = 1;
      for (int64_t d : shape) n *= d;
      return BufferView{data, shape, n};
    }
  };
  std::map<std::string, Buf> all;
  Buf& add(const std::string& name, std::vector<int64_t> shape, char type) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    Buf& b = all[name];
    b.shape = std::move(shape);
    if (type == 'f') b.f32.assign(static_cast<size_t>(n), kNaN);
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
      for (int32_t& x : all.at(n).i32) x = -7;
    }
  }
};

struct Stage {
  const char* row;
  CpuTileFn body;
  std::vector<std::string> reads, writes;
};

template <void (*Body)(const SerialBlock&, const int64_t*, const DevBuffer*, const DevBuffer*), int R, int W>
CpuTileFn body_fn() {
  return &run_body_on_cpu<Body, R, W>;
}

class MoeBlock : public ::testing::Test {
 protected:
  static constexpr int64_t kT = 5, kH = 48, kI = 40, kE = 6, kK = 2, kIM = 24, kXK = 2;
  static constexpr int64_t kR = kT * kXK, kXI = 40, kMaxGu = 18, kMaxDn = 18, kNH = 3;

  void SetUp() override {
    std::mt19937 rng(11);
    std::normal_distribution<float> d(0, 1);
    auto bf16s = [&](int64_t n, float scale) {
      std::vector<uint16_t> v(static_cast<size_t>(n));
      for (uint16_t& x : v) x = f32_to_bf16(scale * d(rng));
      return v;
    };
    auto tiled = [](const std::vector<uint16_t>& m, int64_t rows, int64_t cols, bool gate_up) {
      std::vector<uint16_t> out(static_cast<size_t>(tiled_shape(rows, cols).bytes() / 2));
      pack_tiled(rows, cols, [&](int64_t n) -> const uint16_t* {
        if (!gate_up) return m.data() + n * cols;
        bool up = false;
        const int64_t r = gate_up_source_row(n, up);
        return r < rows / 2 ? m.data() + (r + (up ? rows / 2 : 0)) * cols : nullptr;
      }, out.data());
      return out;
    };
    dense_gate_up_ = tiled(bf16s(2 * kI * kH, 0.3f), 2 * kI, kH, true);
    dense_down_ = tiled(bf16s(kH * kI, 0.3f), kH, kI, false);
    router_ = tiled(bf16s(kE * kH, 2.0f / std::sqrt(float(kH))), kE, kH, false);
    for (int64_t e = 0; e < kE; ++e) {
      const auto gu = tiled(bf16s(2 * kIM * kH, 0.3f), 2 * kIM, kH, true), dn = tiled(bf16s(kH * kIM, 0.3f), kH, kIM, false);
      experts_gate_up_.insert(experts_gate_up_.end(), gu.begin(), gu.end());
      experts_down_.insert(experts_down_.end(), dn.begin(), dn.end());
    }
    for (int l = 0; l < 2; ++l) {
      norm_[l] = bf16s(kH, 0.1f);
      for (uint16_t& w : norm_[l]) w = f32_to_bf16(1 + bf16_to_f32(w));
    }
    auto at = [](const std::vector<uint16_t>& v) { return static_cast<int64_t>(reinterpret_cast<uintptr_t>(v.data())); };
    Buffers::Buf& cfg = b_.add("cfg", {kCfgWords}, 'i');
    std::fill(cfg.i32.begin(), cfg.i32.end(), 0);
    cfg.i32[kCfgEpsBits] = std::bit_cast<int32_t>(1e-6f);
    cfg.i32[kCfgRowsH] = 16;
    cfg.i32[kCfgMoeRowsE] = 16;
    cfg.i32[kCfgMoeRowsXI] = 8;
    cfg.i32[kCfgMoeDenseInter] = kI;
    cfg.i32[kCfgMoeNormTopk] = 1;
    cfg.i32[kCfgMoeInter] = kIM;
    cfg.i32[kCfgMoeTopK] = kK;
    cfg.i32[kCfgMoeExperts] = kE;
    Buffers::Buf& wtab = b_.add("wtab", {2, kWeightColumns}, 'l');
    wtab.i64[kWgateUp] = at(dense_gate_up_);
    wtab.i64[kWdown] = at(dense_down_);
    wtab.i64[kWpostNorm] = at(norm_[0]);
    wtab.i64[kWeightColumns + kWrouter] = at(router_);
    wtab.i64[kWeightColumns + kWexpertsGateUp] = at(experts_gate_up_);
    wtab.i64[kWeightColumns + kWexpertsDown] = at(experts_down_);
    wtab.i64[kWeightColumns + kWpostNorm] = at(norm_[1]);
    Buffers::Buf& x_mid = b_.add("x_mid", {kT, kH}, 'f');
    for (float& v : x_mid.f32) v = d(rng);
    b_.add("router_logits", {kT, kE}, 'f');
    b_.add("route_ids", {kT, kXK}, 'i');
    b_.add("route_w", {kT, kXK}, 'f');
    b_.add("exp_indptr", {kE + 1}, 'i');
    b_.add("perm", {kR}, 'i');
    b_.add("sorted_w", {kR}, 'f');
    b_.add("pos", {kT, kXK}, 'i');
    b_.add("gu_ptr", {2, kE + 1}, 'i');
    b_.add("dn_ptr", {2, kE + 1}, 'i');
    b_.add("act_s", {kR, kXI}, 'f');
    b_.add("y_s", {kR, kH}, 'f');
    b_.add("x", {2, kT, kH}, 'f');
    // Phase 1's buffers, for the chain comparison.
    b_.add("act", {kT, std::max(kI, kK * kIM)}, 'f');
    b_.add("x1", {2, kT, kH}, 'f');
  }

  // Runs `fn` on tiles (l, 0..n), or on tile (l) when n is 0.
  void run(CpuTileFn fn, int64_t l, int64_t n, const std::vector<std::string>& reads,
           const std::vector<std::string>& writes) {
    const std::vector<BufferView> r = b_.views(reads), w = b_.views(writes);
    for (int64_t i = 0; i < std::max<int64_t>(n, 1); ++i) {
      const int64_t tile[2] = {l, i};
      fn(TileArgs{.tile = std::span<const int64_t>(tile, n == 0 ? 1 : 2), .reads = r, .writes = w});
    }
  }

  // Runs a stage's body, keeps its outputs, runs the reference (whose outputs the next stage
  // reads), and compares: exactly, or within `tol` relative to the reference's magnitude.
  void check_stage(const Stage& s, int64_t l, int64_t n, double tol) {
    SCOPED_TRACE(std::string(s.row) + " layer " + std::to_string(l));
    const TileFunction* fn = Registry::builtins().find(s.row);
    ASSERT_NE(fn, nullptr);
    ASSERT_EQ(fn->num_reads, static_cast<int>(s.reads.size()));
    ASSERT_EQ(fn->num_writes, static_cast<int>(s.writes.size()));
    b_.poison(s.writes);
    run(s.body, l, n, s.reads, s.writes);
    std::map<std::string, Buffers::Buf> body;
    for (const std::string& w : s.writes) body[w] = b_.all.at(w);
    b_.poison(s.writes);
    run(fn->cpu, l, n, s.reads, s.writes);
    for (const std::string& w : s.writes) {
      const Buffers::Buf &ours = body.at(w), &ref = b_.all.at(w);
      EXPECT_EQ(ours.i32, ref.i32) << w;
      for (size_t i = 0; i < ref.f32.size(); ++i) {
        if (std::isnan(ref.f32[i])) {  // not written by the reference: nor by the body
          EXPECT_TRUE(std::isnan(ours.f32[i])) << w << "[" << i << "]";
        } else if (tol == 0) {
          ASSERT_EQ(ours.f32[i], ref.f32[i]) << w << "[" << i << "]";
        } else {
          ASSERT_NEAR(ours.f32[i], ref.f32[i], tol * (1 + std::fabs(ref.f32[i]))) << w << "[" << i << "]";
        }
      }
    }
  }

  Buffers b_;
  std::vector<uint16_t> dense_gate_up_, dense_down_, router_, experts_gate_up_, experts_down_, norm_[2];
};

TEST_F(MoeBlock, BodiesMatchReferencesStageByStage) {
  const Stage router{"moe_router", body_fn<&moe_router_body<SerialBlock>, 3, 1>(), {"cfg", "wtab", "x_mid"},
                     {"router_logits"}};
  const Stage topk{"moe_topk", body_fn<&moe_topk_body<SerialBlock>, 3, 2>(), {"cfg", "wtab", "router_logits"},
                   {"route_ids", "route_w"}};
  const Stage plan{"moe_plan", body_fn<&moe_plan_body<SerialBlock>, 5, 6>(),
                   {"cfg", "wtab", "x_mid", "route_ids", "route_w"},
                   {"exp_indptr", "perm", "sorted_w", "pos", "gu_ptr", "dn_ptr"}};
  const Stage gate_up{"moe_expert_gate_up", body_fn<&moe_expert_gate_up_body<SerialBlock>, 6, 1>(),
                      {"cfg", "wtab", "x_mid", "exp_indptr", "perm", "gu_ptr"}, {"act_s"}};
  const Stage down{"moe_expert_down", body_fn<&moe_expert_down_body<SerialBlock>, 6, 1>(),
                   {"cfg", "wtab", "act_s", "exp_indptr", "sorted_w", "dn_ptr"}, {"y_s"}};
  const Stage combine{"moe_combine_residual", body_fn<&moe_combine_residual_body<SerialBlock>, 4, 1>(), {"cfg", "y_s", "pos", "x_mid"},
                      {"x"}};
  for (int64_t l : {0, 1}) {
    check_stage(router, l, 1, 1e-4);
    check_stage(topk, l, kT, 0);  // from the same logits: the same experts and weights, bit for bit
    check_stage(plan, l, 0, 0);
    if (l == 0) {  // a dense layer: one expert with every token, 5 gate/up tiles of its 40 rows
      const std::vector<int32_t>& gu = b_.all.at("gu_ptr").i32;
      EXPECT_EQ(std::vector<int32_t>(gu.begin(), gu.begin() + 3), (std::vector<int32_t>{0, 5, 5}));
    }
    check_stage(gate_up, l, kMaxGu, 1e-4);
    check_stage(down, l, kMaxDn, 1e-4);
    check_stage(combine, l, kNH, 1e-5);
  }
  // Layer 1 is sparse: 10 (token, slot) rows over the experts, 3 gate/up and 3 down tiles per
  // routed expert, the rest never released.
  const std::vector<int32_t>& gu = b_.all.at("gu_ptr").i32;
  EXPECT_EQ(b_.all.at("exp_indptr").i32.back(), kT * kK);
  int routed = 0;
  for (int64_t e = 0; e < kE; ++e) routed += gu[kE + 1 + e + 1] > gu[kE + 1 + e];
  EXPECT_GE(routed, 2);
  EXPECT_EQ(gu[2 * (kE + 1) - 1], routed * 3);
}

TEST_F(MoeBlock, UnreleasedTilesAndDenseRoutersStreamNothing) {
  b_.all.at("gu_ptr").i32 = {0, 5, 5, 5, 5, 5, 5, 0, 3, 3, 6, 6, 6, 6};
  b_.all.at("exp_indptr").i32 = {0, 4, 4, 7, 7, 7, 7};
  const std::vector<std::string> reads = {"cfg", "wtab", "x_mid", "exp_indptr", "perm", "gu_ptr"};
  std::vector<DevBuffer> r(reads.size()), w(1);
  for (size_t i = 0; i < reads.size(); ++i) {
    const BufferView v = b_.all.at(reads[i]).view();
    r[i] = DevBuffer{.data = v.data, .rank = static_cast<int>(v.shape.size()), .numel = v.numel};
    for (size_t k = 0; k < v.shape.size(); ++k) r[i].shape[k] = v.shape[k];
  }
  const BufferView act = b_.all.at("act_s").view();
  w[0] = DevBuffer{.data = act.data, .shape = {kR, kXI}, .rank = 2, .numel = act.numel};
  const SerialBlock block(nullptr);
  const int64_t released[2] = {1, 5}, unreleased[2] = {1, 6}, dense[2] = {0, 0};
  const WeightStream s = moe_expert_gate_up_stream(block, released, r.data(), w.data());
  EXPECT_GT(s.chunks(), 0);
  // Tile 5 is expert 2's third: its rows start 16 outputs (two fused groups) into expert 2's matrix.
  EXPECT_EQ(s.base, reinterpret_cast<const unsigned char*>(experts_gate_up_.data() + 2 * expert_stride(2 * kIM, kH)));
  EXPECT_EQ(s.g0, 2);
  EXPECT_EQ(moe_expert_gate_up_stream(block, unreleased, r.data(), w.data()).chunks(), 0);
  DevBuffer logits{.data = b_.all.at("router_logits").f32.data(), .shape = {kT, kE}, .rank = 2, .numel = kT * kE};
  EXPECT_EQ(moe_router_stream(block, dense, r.data(), &logits).chunks(), 0);
}

TEST_F(MoeBlock, ChainEqualsPhaseOneBlock) {
  const Registry& reg = Registry::builtins();
  auto cpu = [&](const char* name) { return reg.find(name)->cpu; };
  for (int64_t l : {0, 1}) {
    SCOPED_TRACE("layer " + std::to_string(l));
    run(cpu("moe_router"), l, 1, {"cfg", "wtab", "x_mid"}, {"router_logits"});
    run(cpu("moe_topk"), l, kT, {"cfg", "wtab", "router_logits"}, {"route_ids", "route_w"});
    const std::vector<int32_t> ids2 = b_.all.at("route_ids").i32;
    const std::vector<float> w2 = b_.all.at("route_w").f32;
    run(cpu("moe_plan"), l, 0, {"cfg", "wtab", "x_mid", "route_ids", "route_w"},
        {"exp_indptr", "perm", "sorted_w", "pos", "gu_ptr", "dn_ptr"});
    run(cpu("moe_expert_gate_up"), l, kMaxGu, {"cfg", "wtab", "x_mid", "exp_indptr", "perm", "gu_ptr"}, {"act_s"});
    run(cpu("moe_expert_down"), l, kMaxDn, {"cfg", "wtab", "act_s", "exp_indptr", "sorted_w", "dn_ptr"}, {"y_s"});
    run(cpu("moe_combine_residual"), l, kNH, {"cfg", "y_s", "pos", "x_mid"}, {"x"});

    run(cpu("moe_gate_up"), l, kT, {"cfg", "wtab", "x_mid"}, {"act", "route_ids", "route_w"});
    // Phase 1 routes from its own logits in double, phase 2 from the float logits buffer.
    EXPECT_EQ(b_.all.at("route_ids").i32, ids2);
    for (size_t i = 0; i < w2.size(); ++i) EXPECT_NEAR(b_.all.at("route_w").f32[i], w2[i], 1e-6) << i;
    run(cpu("moe_down"), l, kNH, {"cfg", "wtab", "act", "route_ids", "route_w", "x_mid"}, {"x1"});
    const std::vector<float>&ours = b_.all.at("x").f32, &phase1 = b_.all.at("x1").f32;
    const size_t half = static_cast<size_t>(kT * kH), base = (l + 1) % 2 * half;
    for (size_t i = base; i < base + half; ++i) {
      ASSERT_TRUE(std::isfinite(ours[i])) << i;
      ASSERT_NEAR(ours[i], phase1[i], 1e-5 * (1 + std::fabs(phase1[i]))) << i;
    }
  }
}

}  // namespace
}  // namespace evt::kernels::llm
