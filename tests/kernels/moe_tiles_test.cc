// The MoE decode graph's MLP tile functions (kernels/llm/moe_gate_up.cc, moe_down.cc), CPU
// references so far: a dense layer of an MoE model computes bit for bit what the dense graph's
// gate_up_silu and down_proj compute, and a sparse layer routes as transformers'
// Qwen3MoeTopKRouter does (softmax, top-k with ties to the lower index, renormalized or not) and
// sums the chosen experts' outputs with their weights. Outputs are poisoned with NaN first.

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "kernels/llm/decode_config.h"
#include "kernels/llm/moe_layout.h"
#include "kernels/llm/moe_reference.h"
#include "kernels/llm/moe_router.h"
#include "kernels/llm/warp_ops.h"
#include "kernels/llm/weight_tiles.h"
#include "kernels/registry.h"

namespace evt::kernels::llm {
namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr uint16_t kBf16NaN = 0x7fc0;

// A buffer of T values with its shape, viewed as the registry's functions take it.
template <typename T>
struct Buf {
  std::vector<int64_t> shape;
  std::vector<T> values;
  Buf(std::vector<int64_t> s, T fill) : shape(std::move(s)) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    values.assign(static_cast<size_t>(n), fill);
  }
  BufferView view() { return BufferView{values.data(), shape, static_cast<int64_t>(values.size())}; }
};

// Runs registry row `name` on every tile of a (1, n) grid: layer 0.
void run_tiles(const char* name, int64_t tiles, std::vector<BufferView> reads, std::vector<BufferView> writes) {
  const TileFunction* fn = Registry::builtins().find(name);
  ASSERT_NE(fn, nullptr) << name;
  ASSERT_EQ(fn->num_reads, static_cast<int>(reads.size())) << name;
  ASSERT_EQ(fn->num_writes, static_cast<int>(writes.size())) << name;
  for (int64_t n = 0; n < tiles; ++n) {
    const int64_t tile[2] = {0, n};
    fn->cpu(TileArgs{.tile = tile, .reads = reads, .writes = writes});
  }
}

// A rows x cols row-major bf16 matrix in the projections' tiled layout (weight_tiles.h) with
// panels of panel_rows rows (0: one); with `gate_up`, rows [0, rows/2) are the gate and the rest the
// up rows, fused as gate_up_silu reads them.
std::vector<uint16_t> tiled(const std::vector<uint16_t>& m, int64_t rows, int64_t cols, int64_t panel_rows,
                            bool gate_up = false) {
  std::vector<uint16_t> out(static_cast<size_t>(tiled_shape(rows, cols).bytes() / 2));
  pack_tiled(rows, cols, panel_rows, [&](int64_t n) -> const uint16_t* {
    if (!gate_up) return m.data() + n * cols;
    bool up = false;
    const int64_t r = gate_up_source_row(n, up);
    return r < rows / 2 ? m.data() + (r + (up ? rows / 2 : 0)) * cols : nullptr;
  }, out.data());
  return out;
}

std::vector<uint16_t> random_bf16(size_t n, std::mt19937& rng, float scale) {
  std::normal_distribution<float> d(0, scale);
  std::vector<uint16_t> v(n);
  for (uint16_t& x : v) x = f32_to_bf16(d(rng));
  return v;
}

int64_t address(const std::vector<uint16_t>& v) { return static_cast<int64_t>(reinterpret_cast<uintptr_t>(v.data())); }

Buf<int32_t> make_cfg(int64_t rows_h, int64_t rows_i) {
  Buf<int32_t> cfg({kCfgWords}, 0);
  cfg.values[kCfgEpsBits] = std::bit_cast<int32_t>(1e-6f);
  cfg.values[kCfgRowsH] = static_cast<int32_t>(rows_h);
  cfg.values[kCfgRowsI] = static_cast<int32_t>(rows_i);
  return cfg;
}

TEST(MoeTiles, DenseLayerIsGateUpSiluThenDownProjBitForBit) {
  const int64_t tokens = 3, hidden = 48, inter = 40, slots = 2, width = 64;
  std::mt19937 rng(5);
  // Panels of the tiles make_cfg(16, 8) sets, as decode_weights packs a dense layer's MLP.
  const std::vector<uint16_t> gate_up = tiled(random_bf16(2 * inter * hidden, rng, 0.2f), 2 * inter, hidden, 16, true);
  const std::vector<uint16_t> down = tiled(random_bf16(hidden * inter, rng, 0.2f), hidden, inter, 16);
  std::vector<uint16_t> norm = random_bf16(hidden, rng, 0.1f);
  for (uint16_t& w : norm) w = f32_to_bf16(1 + bf16_to_f32(w));
  Buf<int32_t> cfg = make_cfg(16, 8);
  cfg.values[kCfgMoeDenseInter] = static_cast<int32_t>(inter);
  Buf<int64_t> wtab({1, kWeightColumns}, 0);
  wtab.values[kWgateUp] = address(gate_up);
  wtab.values[kWdown] = address(down);
  wtab.values[kWpostNorm] = address(norm);
  Buf<uint16_t> x_mid({tokens, hidden}, 0);  // the residual stream, bf16
  std::normal_distribution<float> d(0, 1);
  for (uint16_t& v : x_mid.values) v = f32_to_bf16(d(rng));

  // The dense graph's act is bf16, rounded where the MoE block's act rounds when its down stages it.
  Buf<uint16_t> act_dense({tokens, inter}, 0xffff);
  Buf<float> act({tokens, width}, kNaN), route_w({tokens, slots}, kNaN);
  Buf<int32_t> route_ids({tokens, slots}, 7);
  run_tiles("gate_up_silu", inter / 8, {cfg.view(), wtab.view(), x_mid.view()}, {act_dense.view()});
  run_tiles("moe_gate_up", tokens, {cfg.view(), wtab.view(), x_mid.view()},
            {act.view(), route_ids.view(), route_w.view()});
  for (int64_t t = 0; t < tokens; ++t) {
    EXPECT_EQ(route_ids.values[t * slots], 0);
    EXPECT_EQ(route_ids.values[t * slots + 1], -1);
    EXPECT_EQ(route_w.values[t * slots], 1.0f);
    EXPECT_EQ(route_w.values[t * slots + 1], 0.0f);
    for (int64_t r = 0; r < inter; ++r) {
      ASSERT_TRUE(std::isfinite(act.values[t * width + r]));
      ASSERT_EQ(f32_to_bf16(act.values[t * width + r]), act_dense.values[t * inter + r]) << t << ", " << r;
    }
  }

  Buf<uint16_t> x_dense({2, tokens, hidden}, kBf16NaN), x({2, tokens, hidden}, kBf16NaN);
  run_tiles("down_proj", hidden / 16, {cfg.view(), wtab.view(), act_dense.view(), x_mid.view()}, {x_dense.view()});
  run_tiles("moe_down", hidden / 16,
            {cfg.view(), wtab.view(), act.view(), route_ids.view(), route_w.view(), x_mid.view()}, {x.view()});
  for (int64_t i = tokens * hidden; i < 2 * tokens * hidden; ++i) {
    ASSERT_TRUE(std::isfinite(bf16_to_f32(x.values[i])));
    ASSERT_EQ(x.values[i], x_dense.values[i]) << i;
  }
}

// Constant weight rows make every dot a product of two known numbers: router row e holds z_e / H,
// so token t's logit e is z_e / H times the sum of its normalized input (x_mid[t] = c_t plus a
// small ramp: about sign(c_t) H); expert e's gate and up rows hold a_e / H and b_e / H, its down
// rows d_e. Token 0 ties experts 1 and 3, which must come in index order; token 1 routes to 2, 5.
class SparseLayer : public ::testing::TestWithParam<bool> {};

TEST_P(SparseLayer, RoutesAndCombinesAsQwen3Moe) {
  const bool norm_topk = GetParam();
  const int64_t tokens = 2, hidden = 32, experts = 6, top_k = 2, inter = 16, slots = 3, width = 40;
  const double z[experts] = {0.5, 2, -1, 2, 1, 0};
  const double a[experts] = {0.5, 1, -0.75, 0.25, 1.5, -1}, b[experts] = {1, -0.5, 0.75, 2, -1, 0.5};
  const double dn[experts] = {0.125, -0.25, 0.5, 0.0625, -0.5, 1};
  const double c[tokens] = {1.5, -2};
  std::vector<uint16_t> router(experts * hidden), norm(hidden, f32_to_bf16(1.0f));
  std::vector<uint16_t> gate_up, down;
  for (int64_t e = 0; e < experts; ++e) {
    for (int64_t k = 0; k < hidden; ++k) router[e * hidden + k] = f32_to_bf16(static_cast<float>(z[e] / hidden));
    std::vector<uint16_t> gu(2 * inter * hidden), dw(hidden * inter, f32_to_bf16(static_cast<float>(dn[e])));
    for (int64_t i = 0; i < inter * hidden; ++i) {
      gu[i] = f32_to_bf16(static_cast<float>(a[e] / hidden));
      gu[inter * hidden + i] = f32_to_bf16(static_cast<float>(b[e] / hidden));
    }
    const std::vector<uint16_t> gu_tiled = tiled(gu, 2 * inter, hidden, 0, true), dw_tiled = tiled(dw, hidden, inter, 0);
    ASSERT_EQ(static_cast<int64_t>(gu_tiled.size()), tiled_shape(2 * inter, hidden).bytes() / 2);
    gate_up.insert(gate_up.end(), gu_tiled.begin(), gu_tiled.end());
    down.insert(down.end(), dw_tiled.begin(), dw_tiled.end());
  }
  const std::vector<uint16_t> router_tiled = tiled(router, experts, hidden, 0);
  Buf<int32_t> cfg = make_cfg(16, 8);
  cfg.values[kCfgMoeExperts] = experts;
  cfg.values[kCfgMoeTopK] = top_k;
  cfg.values[kCfgMoeInter] = inter;
  cfg.values[kCfgMoeNormTopk] = norm_topk ? 1 : 0;
  Buf<int64_t> wtab({1, kWeightColumns}, 0);
  wtab.values[kWrouter] = address(router_tiled);
  wtab.values[kWexpertsGateUp] = address(gate_up);
  wtab.values[kWexpertsDown] = address(down);
  wtab.values[kWpostNorm] = address(norm);
  Buf<uint16_t> x_mid({tokens, hidden}, 0);  // the residual stream, bf16
  for (int64_t t = 0; t < tokens; ++t) {
    for (int64_t k = 0; k < hidden; ++k) {
      x_mid.values[t * hidden + k] = f32_to_bf16(static_cast<float>(c[t] + 0.001 * k));
    }
  }
  const auto xm = [&](int64_t t, int64_t k) { return static_cast<double>(bf16_to_f32(x_mid.values[t * hidden + k])); };

  Buf<float> act({tokens, width}, kNaN), route_w({tokens, slots}, kNaN);
  Buf<uint16_t> x({2, tokens, hidden}, kBf16NaN);
  Buf<int32_t> route_ids({tokens, slots}, 7);
  run_tiles("moe_gate_up", tokens, {cfg.view(), wtab.view(), x_mid.view()},
            {act.view(), route_ids.view(), route_w.view()});
  run_tiles("moe_down", hidden / 16,
            {cfg.view(), wtab.view(), act.view(), route_ids.view(), route_w.view(), x_mid.view()}, {x.view()});

  const std::vector<std::vector<int32_t>> expected_ids = {{1, 3, -1}, {2, 5, -1}};
  for (int64_t t = 0; t < tokens; ++t) {
    SCOPED_TRACE("token " + std::to_string(t));
    // Every projection takes x * w rounded to bf16 (w = 1 here) and scales its dots by the row's
    // RMSNorm scale (gemv.h, stage_pass): about sign(c_t) H times a constant row's value.
    double xn_sum_sq = 0, x_total = 0;
    for (int64_t k = 0; k < hidden; ++k) {
      xn_sum_sq += std::pow(xm(t, k), 2);
      x_total += xm(t, k);
    }
    const double scale = 1 / std::sqrt(xn_sum_sq / hidden + 1e-6);
    const auto dot = [&](double row_value) {
      return bf16_to_f32(f32_to_bf16(static_cast<float>(row_value / hidden))) * x_total * scale;
    };
    std::vector<double> p(experts);
    double sum = 0;
    for (int64_t e = 0; e < experts; ++e) sum += p[e] = std::exp(dot(z[e]));
    for (double& v : p) v /= sum;
    const std::vector<int32_t> ids(route_ids.values.begin() + t * slots, route_ids.values.begin() + (t + 1) * slots);
    ASSERT_EQ(ids, expected_ids[t]);
    const double chosen = p[ids[0]] + p[ids[1]];
    std::vector<double> out(hidden);
    for (int64_t k = 0; k < hidden; ++k) out[k] = xm(t, k);
    for (int64_t s = 0; s < top_k; ++s) {
      const int32_t e = ids[s];
      const double w = norm_topk ? p[e] / chosen : p[e];
      EXPECT_NEAR(route_w.values[t * slots + s], w, 1e-6) << "slot " << s;
      const double g = dot(a[e]), u = dot(b[e]);
      const double act_value = g / (1 + std::exp(-g)) * u;
      for (int64_t r = 0; r < inter; ++r) EXPECT_NEAR(act.values[t * width + s * inter + r], act_value, 1e-5);
      for (int64_t k = 0; k < hidden; ++k) {
        out[k] += route_w.values[t * slots + s] * inter * dn[e] * bf16_to_f32(f32_to_bf16(static_cast<float>(act_value)));
      }
    }
    EXPECT_EQ(route_w.values[t * slots + 2], 0.0f);
    for (int64_t k = 0; k < hidden; ++k) {
      // Rounded to bf16: within half an ulp, 1/256 of the value.
      EXPECT_NEAR(bf16_to_f32(x.values[(tokens + t) * hidden + k]), out[k], 1e-4 + std::fabs(out[k]) / 256) << k;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(NormTopk, SparseLayer, ::testing::Bool(),
                         [](const auto& info) { return info.param ? "renormalized" : "softmax_weights"; });

// The bodies' 16-ary search finds the expert of every tile as a plain scan does, over tables with
// empty ranges (unrouted experts) at the ends and between, of expert counts around its rounds'
// sizes; and -1 past the last range.
TEST(MoeTileExpert, FindsTheRangeThatHoldsEachTileAsAScanDoes) {
  std::mt19937 rng(7);
  for (const int64_t experts : {1, 2, 15, 16, 17, 31, 128, 255, 256}) {
    for (int round = 0; round < 20; ++round) {
      std::vector<int32_t> ptr{0};
      for (int64_t e = 0; e < experts; ++e) ptr.push_back(ptr.back() + static_cast<int32_t>(rng() % 4 == 0 ? 0 : rng() % 5));
      for (int64_t i = 0; i < ptr.back() + 3; ++i) {
        ASSERT_EQ(moe_tile_expert(ptr.data(), experts, i), ref_tile_expert(ptr.data(), experts, i))
            << experts << " experts, tile " << i;
      }
    }
  }
}

// Router tile i covers experts [i % P * rows_e, ...) of tokens [i / P * 16, ...) for the P tiles
// of experts a pass; a step of one pass takes i as is.
TEST(MoeRouterTile, SpreadsThePassesOverTiles) {
  std::vector<int32_t> cfg(kCfgWords, 0);
  for (const auto& [experts, rows_e] : {std::pair{128, 16}, {60, 16}, {8, 16}, {256, 32}}) {
    cfg[kCfgMoeExperts] = experts;
    cfg[kCfgMoeRowsE] = rows_e;
    const int64_t per_pass = (experts + rows_e - 1) / rows_e;
    for (const int64_t tokens : {1, 16, 17, 40, 1024}) {
      const int64_t passes = (tokens + kPassTokens - 1) / kPassTokens;
      for (int64_t i = 0; i < per_pass * passes; ++i) {
        const RouterTile rt = router_tile(cfg.data(), tokens, i);
        EXPECT_EQ(rt.experts_tile, i % per_pass) << experts << " experts, " << tokens << " tokens, tile " << i;
        EXPECT_EQ(rt.first_token, i / per_pass * kPassTokens) << experts << " experts, " << tokens << " tokens, tile " << i;
      }
    }
  }
}

// Built-in rows may not share a name: a later one would replace the earlier, as this branch's
// first moe_combine did examples/moe_routed.evt's.
TEST(RegistryDeathTest, SecondBuiltinOfTheSameNameAborts) {
  EXPECT_DEATH(Registry::register_builtin(TileFunction{.name = "moe_down", .cpu = nullptr}),
               "two built-in tile functions are named moe_down");
}

}  // namespace
}  // namespace evt::kernels::llm
