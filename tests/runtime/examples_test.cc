// Both example graphs, for B = 1..64 from one parsed and compiled graph: the serial run matches
// a plain reference computed here, and every parallel schedule matches the serial run bit for bit.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "support/graph_fixtures.h"

namespace evt {
namespace {

using runtime::cpu::ExecOptions;
using runtime::cpu::Schedule;

struct Mode {
  const char* name;
  ExecOptions options;
};

std::vector<Mode> modes(uint64_t seed) {
  return {
      {"static", {.schedule = Schedule::kStatic, .workers = 4}},
      {"dynamic", {.schedule = Schedule::kDynamic, .workers = 4}},
      {"dynamic early push", {.schedule = Schedule::kDynamic, .workers = 3, .early_push = true}},
      {"static chaos", {.schedule = Schedule::kStatic, .workers = 4, .chaos_seed = seed}},
      {"dynamic chaos", {.schedule = Schedule::kDynamic, .workers = 4, .chaos_seed = seed}},
      {"dynamic early push chaos", {.schedule = Schedule::kDynamic, .workers = 5, .early_push = true, .chaos_seed = seed}},
  };
}

// Runs `g` serially, checks it with `reference`, then checks every mode against the serial run.
template <typename Reference>
void check_all_modes(const ir::Graph& g, int64_t b, Reference&& reference) {
  auto tg = ir::instantiate(g, {{"B", b}});
  ASSERT_TRUE(tg.ok()) << tg.status().message();
  const kernels::Registry& registry = kernels::Registry::builtins();
  auto serial_store = testing::seeded_store(*tg, b);
  auto serial = runtime::cpu::execute_serial(*tg, registry, *serial_store);
  ASSERT_TRUE(serial.ok()) << serial.status().message();
  reference(*serial_store);
  for (const Mode& mode : modes(static_cast<uint64_t>(b) * 7919)) {
    SCOPED_TRACE(mode.name);
    auto store = testing::seeded_store(*tg, b);
    auto stats = runtime::cpu::execute(*tg, registry, *store, mode.options);
    ASSERT_TRUE(stats.ok()) << stats.status().message();
    EXPECT_EQ(stats->tasks_run, serial->tasks_run);
    EXPECT_EQ(stats->tasks_run + stats->tasks_inactive, tg->num_tasks());
    Status same = store->compare_outputs(*serial_store);
    EXPECT_TRUE(same.ok()) << same.message();
  }
}

class SplitK : public ::testing::TestWithParam<int64_t> {};

TEST_P(SplitK, MatchesReferenceInEveryMode) {
  const int64_t b = GetParam();
  static const ir::Graph g = testing::compiled_example("splitk.evt", {{"B", 17}});
  check_all_modes(g, b, [&](const runtime::cpu::BufferStore& store) {
    const float* a = testing::buffer_data<float>(store, g, "A");
    const float* c = testing::buffer_data<float>(store, g, "C");
    for (int64_t r = 0; r < b * 32; ++r) {
      double want = 0;
      for (int64_t k = 0; k < 128; ++k) want += a[r * 128 + k];
      ASSERT_NEAR(c[r], want, 1e-4) << "row " << r;
    }
  });
}

INSTANTIATE_TEST_SUITE_P(B, SplitK, ::testing::Range<int64_t>(1, 65));

class MoeRouted : public ::testing::TestWithParam<int64_t> {};

TEST_P(MoeRouted, MatchesReferenceInEveryMode) {
  const int64_t b = GetParam();
  static const ir::Graph g = testing::compiled_example("moe_routed.evt", {{"B", 17}});
  constexpr int kH = 16, kExperts = 8, kTopK = 2;
  check_all_modes(g, b, [&](const runtime::cpu::BufferStore& store) {
    const float* x = testing::buffer_data<float>(store, g, "x");
    const float* wr = testing::buffer_data<float>(store, g, "wr");
    const float* we = testing::buffer_data<float>(store, g, "we");
    const float* out = testing::buffer_data<float>(store, g, "out");
    for (int64_t i = 0; i < b; ++i) {
      // Route: the two largest logits (ties: lower index), weighted 2/3 and 1/3.
      std::vector<double> logit(kExperts, 0);
      for (int e = 0; e < kExperts; ++e) {
        for (int c = 0; c < kH; ++c) logit[e] += double(x[i * kH + c]) * wr[c * kExperts + e];
      }
      std::vector<int> order(kExperts);
      std::iota(order.begin(), order.end(), 0);
      std::stable_sort(order.begin(), order.end(), [&](int p, int q) { return logit[p] > logit[q]; });
      const double weight[kTopK] = {2.0 / 3, 1.0 / 3};
      for (int c = 0; c < kH; ++c) {
        double want = 0;
        for (int s = 0; s < kTopK; ++s) {
          double y = 0;
          for (int d = 0; d < kH; ++d) y += double(x[i * kH + d]) * we[(order[s] * kH + d) * kH + c];
          want += weight[s] * y;
        }
        ASSERT_NEAR(out[i * kH + c], want, 1e-4) << "token " << i << " column " << c;
      }
    }
  });
}

INSTANTIATE_TEST_SUITE_P(B, MoeRouted, ::testing::Range<int64_t>(1, 65));

// Routing makes some expert tiles inactive: they are skipped (static) or never pushed (dynamic).
TEST(MoeRouted, TilesOfUnusedCapacityAreNeverRun) {
  const ir::Graph g = testing::compiled_example("moe_routed.evt", {{"B", 3}});
  auto tg = ir::instantiate(g, {{"B", 3}});
  ASSERT_TRUE(tg.ok());
  auto store = testing::seeded_store(*tg, 3);
  auto stats = runtime::cpu::execute(*tg, kernels::Registry::builtins(), *store, {.schedule = Schedule::kDynamic});
  ASSERT_TRUE(stats.ok()) << stats.status().message();
  const int32_t* indptr = testing::buffer_data<int32_t>(*store, g, "indptr");
  const int64_t active_expert_tiles = indptr[8];
  EXPECT_EQ(stats->tasks_inactive, (3 + 4) - active_expert_tiles);
  EXPECT_GT(stats->tasks_inactive, 0);
}

}  // namespace
}  // namespace evt
