// The sample row's rules (src/kernels/llm/sample.h), checked on the CPU for both the registry's
// reference and the body on the host's one-thread block: over many counters the draws follow
// softmax(z) restricted to the tokens the filters keep, and never leave that set; a draw
// depends on its seed and counter alone; and the body agrees with the reference on random rows
// full of edge values. The tile cases (llm_tile_cases.cc) compare the two on the GPU too.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <iostream>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "kernels/llm/sample.h"
#include "kernels/llm_tile_cases.h"
#include "kernels/registry.h"
#include "kernels/tile_body.h"

namespace evt::testing::llm {
namespace {

using kernels::BufferView;
using kernels::CpuTileFn;
using kernels::llm::SampleParams;

// One token's penalty entry: (token, count).
using Penalty = std::pair<int32_t, int32_t>;

// A batch of rows for the sample row, all V wide, run through one implementation.
class SampleBatch {
 public:
  explicit SampleBatch(int64_t vocab) : vocab_(vocab) {}

  void add(const std::vector<float>& logits, const SampleParams& p, const std::vector<Penalty>& penalties = {}) {
    ASSERT_EQ(static_cast<int64_t>(logits.size()), vocab_);
    logits_.insert(logits_.end(), logits.begin(), logits.end());
    samp_.resize(samp_.size() + kernels::llm::kSampleWords);
    kernels::llm::pack_sample_row(p, samp_.data() + samp_.size() - kernels::llm::kSampleWords);
    for (const Penalty& e : penalties) pen_.insert(pen_.end(), {e.first, e.second});
    pen_start_.push_back(static_cast<int32_t>(pen_.size() / 2));
  }
  int64_t rows() const { return static_cast<int64_t>(pen_start_.size()) - 1; }

  // Each row's next token.
  std::vector<int32_t> run(CpuTileFn fn) const {
    const int64_t s = rows();
    std::vector<int32_t> pen = pen_.empty() ? std::vector<int32_t>{0, 1} : pen_;  // P >= 1
    std::vector<int32_t> next(static_cast<size_t>(s), -1);
    std::vector<float> adj(logits_.size());
    const int64_t logits_shape[] = {s, vocab_}, samp_shape[] = {s, kernels::llm::kSampleWords},
                  start_shape[] = {s + 1}, pen_shape[] = {static_cast<int64_t>(pen.size() / 2), 2}, next_shape[] = {s};
    // The LM head's choices as one tile of the whole row each.
    std::vector<float> best = tile_bests(logits_.data(), s, vocab_, vocab_);
    const int64_t best_shape[] = {s, 1, 2};
    const BufferView reads[] = {
        {const_cast<float*>(logits_.data()), logits_shape, s * vocab_},
        {const_cast<int32_t*>(samp_.data()), samp_shape, s * kernels::llm::kSampleWords},
        {const_cast<int32_t*>(pen_start_.data()), start_shape, s + 1},
        {pen.data(), pen_shape, pen_shape[0] * 2},
        {best.data(), best_shape, s * 2},
    };
    const BufferView writes[] = {{next.data(), next_shape, s}, {adj.data(), logits_shape, s * vocab_}};
    for (int64_t row = 0; row < s; ++row) {
      const int64_t tile[] = {row};
      fn(kernels::TileArgs{tile, reads, writes, nullptr});
    }
    return next;
  }

 private:
  int64_t vocab_;
  std::vector<float> logits_;
  std::vector<int32_t> samp_, pen_start_ = {0}, pen_;
};

CpuTileFn reference() { return kernels::Registry::builtins().find("sample")->cpu; }
CpuTileFn host_body() {
  return &kernels::run_body_on_cpu<&kernels::llm::sample_body<kernels::SerialBlock>, 5, 2>;
}

struct Implementation {
  const char* name;
  CpuTileFn (*fn)();
};

// --- The expected distribution, computed here in double from the rules as a user reads them. ---

// softmax(logits / t) over the tokens of `keep` (all when empty).
std::vector<double> softmax(const std::vector<float>& logits, double t, const std::vector<bool>& keep = {}) {
  std::vector<double> p(logits.size(), 0.0);
  const double m = *std::max_element(logits.begin(), logits.end()) / t;
  double sum = 0;
  for (size_t i = 0; i < logits.size(); ++i) {
    if (keep.empty() || keep[i]) sum += p[i] = std::exp(logits[i] / t - m);
  }
  for (double& v : p) v /= sum;
  return p;
}

// Token indices by descending probability.
std::vector<size_t> by_probability(const std::vector<double>& p) {
  std::vector<size_t> order(p.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return p[a] > p[b]; });
  return order;
}

std::vector<bool> keep_top_k(const std::vector<double>& p, int k) {
  std::vector<bool> keep(p.size(), false);
  const std::vector<size_t> order = by_probability(p);
  for (int r = 0; r < k; ++r) keep[order[static_cast<size_t>(r)]] = true;
  return keep;
}

// The fewest most likely tokens among `keep` whose share of keep's probability reaches top_p.
std::vector<bool> keep_top_p(const std::vector<double>& p, std::vector<bool> keep, double top_p) {
  double kept = 0;
  for (size_t i = 0; i < p.size(); ++i) kept += keep[i] ? p[i] : 0;
  double sum = 0;
  for (size_t i : by_probability(p)) {
    if (!keep[i]) continue;
    if (sum >= top_p * kept) keep[i] = false;
    sum += p[i];
  }
  return keep;
}

std::vector<bool> keep_min_p(const std::vector<double>& p, std::vector<bool> keep, double min_p) {
  const double most = *std::max_element(p.begin(), p.end());
  for (size_t i = 0; i < p.size(); ++i) keep[i] = keep[i] && p[i] >= min_p * most;
  return keep;
}

// Eight logits without near-ties, so no filter's boundary is a close call.
const std::vector<float> kLogits = {0.5f, -1.0f, 2.0f, 0.0f, 1.4f, -3.0f, 1.0f, -0.4f};
const std::vector<bool> kAll(kLogits.size(), true);
constexpr int kDraws = 20000;

class SampleRules : public ::testing::TestWithParam<Implementation> {
 protected:
  // The tokens of kDraws draws (counters 0, 1, ...) of one row's distribution.
  std::vector<int32_t> draws(const SampleParams& params, const std::vector<Penalty>& penalties = {},
                             const std::vector<float>& logits = kLogits) const {
    SampleBatch batch(static_cast<int64_t>(logits.size()));
    SampleParams p = params;
    p.seed = 12345;
    for (int n = 0; n < kDraws; ++n) {
      p.counter = static_cast<uint32_t>(n);
      batch.add(logits, p, penalties);
    }
    return batch.run(GetParam().fn());
  }

  // Draws of kLogits by `params` follow softmax(kLogits / temperature) over the tokens of `keep`.
  void expect_softmax_over(const SampleParams& params, const std::vector<bool>& keep) const {
    expect_frequencies(draws(params), softmax(kLogits, params.temperature, keep));
  }

  // The draws' frequencies are within 5 standard deviations of `want`, and a token of
  // probability 0 is never drawn.
  static void expect_frequencies(const std::vector<int32_t>& tokens, const std::vector<double>& want) {
    std::vector<int64_t> count(want.size(), 0);
    for (int32_t t : tokens) {
      ASSERT_GE(t, 0);
      ASSERT_LT(t, static_cast<int32_t>(want.size()));
      ++count[static_cast<size_t>(t)];
    }
    const double n = static_cast<double>(tokens.size());
    for (size_t i = 0; i < want.size(); ++i) {
      const double got = static_cast<double>(count[i]) / n;
      if (want[i] == 0) {
        EXPECT_EQ(count[i], 0) << "token " << i << " is outside the kept set but was drawn";
        continue;
      }
      const double sigma = std::sqrt(want[i] * (1 - want[i]) / n);
      EXPECT_NEAR(got, want[i], 5 * sigma + 1e-4) << "token " << i;
    }
  }
};

TEST_P(SampleRules, TemperatureFollowsSoftmax) {
  for (float t : {0.5f, 1.0f, 2.0f}) {
    SCOPED_TRACE(t);
    expect_softmax_over({.temperature = t}, kAll);
  }
}

TEST_P(SampleRules, TopKKeepsTheKMostLikely) {
  for (int k : {2, 3, 7}) {
    SCOPED_TRACE(k);
    expect_softmax_over({.temperature = 1, .top_k = k}, keep_top_k(softmax(kLogits, 1), k));
  }
}

TEST_P(SampleRules, TopPKeepsTheFewestReachingP) {
  for (float top_p : {0.3f, 0.6f, 0.9f}) {
    SCOPED_TRACE(top_p);
    expect_softmax_over({.temperature = 0.8f, .top_p = top_p}, keep_top_p(softmax(kLogits, 0.8), kAll, top_p));
  }
}

TEST_P(SampleRules, MinPKeepsTokensNearTheMostLikely) {
  for (float min_p : {0.05f, 0.2f, 0.5f}) {
    SCOPED_TRACE(min_p);
    expect_softmax_over({.temperature = 1.5f, .min_p = min_p}, keep_min_p(softmax(kLogits, 1.5), kAll, min_p));
  }
}

// Top-k, then top-p over what top-k kept (its share of their mass), then min-p.
TEST_P(SampleRules, FiltersApplyInHuggingFacesOrder) {
  const std::vector<double> p = softmax(kLogits, 2);
  expect_softmax_over({.temperature = 2, .top_k = 5, .top_p = 0.7f, .min_p = 0.3f},
                      keep_min_p(p, keep_top_p(p, keep_top_k(p, 5), 0.7), 0.3));
}

TEST_P(SampleRules, PenaltiesLowerThePenalizedLogits) {
  const std::vector<Penalty> penalties = {{2, 3}, {4, 1}, {5, 2}};
  std::vector<float> penalized = kLogits;
  for (const Penalty& e : penalties) penalized[static_cast<size_t>(e.first)] -= 0.5f + 0.25f * e.second;
  expect_frequencies(draws({.temperature = 1, .presence = 0.5f, .frequency = 0.25f}, penalties),
                     softmax(penalized, 1));
}

TEST_P(SampleRules, GreedyTakesTheArgmax) {
  const std::vector<int32_t> greedy = draws({});
  EXPECT_TRUE(std::all_of(greedy.begin(), greedy.end(), [](int32_t t) { return t == 2; }));
  const std::vector<int32_t> top1 = draws({.temperature = 1, .top_k = 1});
  EXPECT_TRUE(std::all_of(top1.begin(), top1.end(), [](int32_t t) { return t == 2; }));
  // Token 2's penalty 0.2 + 0.3 * 2 brings it to 1.2, below token 4's 1.4.
  const std::vector<int32_t> penalized = draws({.presence = 0.2f, .frequency = 0.3f}, {{2, 2}});
  EXPECT_TRUE(std::all_of(penalized.begin(), penalized.end(), [](int32_t t) { return t == 4; }));
}

// V random logits in [-3, 3] (rounded to a grid of 1/4 with ties).
std::vector<float> random_logits(std::mt19937_64& gen, int64_t vocab, bool ties = false) {
  std::uniform_real_distribution<float> value(-3, 3);
  std::vector<float> logits(static_cast<size_t>(vocab));
  for (float& v : logits) v = ties ? std::round(value(gen) * 4) / 4 : value(gen);
  return logits;
}

// A request's draw is the same wherever its row sits in a batch and whatever the other rows are.
TEST_P(SampleRules, ADrawDependsOnSeedAndCounterAlone) {
  std::mt19937_64 gen(7);
  const std::vector<float> logits = random_logits(gen, 1000);
  const SampleParams p{.temperature = 1, .top_p = 0.95f, .seed = 99, .counter = 0};
  SampleBatch alone(1000), crowded(1000);
  for (uint32_t counter = 0; counter < 200; ++counter) {
    SampleParams mine = p;
    mine.counter = counter;
    alone.add(logits, mine);
    SampleParams other{.temperature = 2, .seed = counter, .counter = 5};
    crowded.add(random_logits(gen, 1000), other);
    crowded.add(logits, mine);
  }
  const std::vector<int32_t> a = alone.run(GetParam().fn()), c = crowded.run(GetParam().fn());
  for (size_t n = 0; n < a.size(); ++n) EXPECT_EQ(a[n], c[2 * n + 1]) << "counter " << n;
  EXPECT_EQ(a, alone.run(GetParam().fn()));
}

// Other seeds, or other counters of one seed, draw other tokens from a flat distribution.
TEST_P(SampleRules, SeedsAndCountersDrawIndependently) {
  std::mt19937_64 gen(8);
  const std::vector<float> logits = random_logits(gen, 1000);
  SampleBatch batch(1000);
  for (uint64_t seed : {1, 2}) {
    for (uint32_t counter = 0; counter < 200; ++counter) {
      batch.add(logits, {.temperature = 1, .seed = seed, .counter = counter});
    }
  }
  const std::vector<int32_t> next = batch.run(GetParam().fn());
  int same_across_seeds = 0, same_as_previous_counter = 0;
  for (size_t n = 0; n < 200; ++n) {
    same_across_seeds += next[n] == next[n + 200];
    same_as_previous_counter += n > 0 && next[n] == next[n - 1];
  }
  // Collisions happen with probability sum p_i^2, about 1 in 300 here.
  EXPECT_LE(same_across_seeds, 5);
  EXPECT_LE(same_as_previous_counter, 5);
}

INSTANTIATE_TEST_SUITE_P(Implementations, SampleRules,
                         ::testing::Values(Implementation{"reference", reference},
                                           Implementation{"host_body", host_body}),
                         [](const ::testing::TestParamInfo<Implementation>& info) { return info.param.name; });

// Random rows with every parameter at and past its edges, and logits with ties, infinities and
// NaNs: the body on the host picks what the reference picks.
TEST(SampleBody, MatchesTheReferenceOnRandomRows) {
  std::mt19937_64 gen(2024);
  auto pick = [&](std::initializer_list<float> values) {
    return values.begin()[std::uniform_int_distribution<size_t>(0, values.size() - 1)(gen)];
  };
  const float inf = INFINITY, nan = NAN;
  for (int64_t vocab : {1, 2, 3, 17, 64, 97, 300}) {
    SampleBatch batch(vocab);
    for (int row = 0; row < 150; ++row) {
      std::vector<float> logits = random_logits(gen, vocab, row % 2 == 0);
      const int specials = std::uniform_int_distribution<int>(0, 3)(gen);
      for (int k = 0; k < specials; ++k) {
        logits[std::uniform_int_distribution<size_t>(0, logits.size() - 1)(gen)] = pick({inf, -inf, nan, -0.0f, 40});
      }
      const SampleParams p{.temperature = pick({0, -1, 1e-30f, 0.3f, 1, 2, 1e30f, inf, nan}),
                           .top_k = static_cast<int32_t>(pick({0, -1, 1, 2, 5, 40, 1e6f})),
                           .top_p = pick({1, 0, -1, 1e-6f, 0.5f, 0.9f, 0.999f, nan}),
                           .min_p = pick({0, 1e-40f, 0.01f, 0.3f, 1, 5, nan}),
                           .presence = pick({0, 0.5f, -1}),
                           .frequency = pick({0, 0.25f}),
                           .seed = gen(),
                           .counter = static_cast<uint32_t>(gen())};
      std::vector<Penalty> penalties;
      for (int32_t t = 0; t < vocab; ++t) {
        if (gen() % 4 == 0) penalties.emplace_back(t, static_cast<int32_t>(1 + gen() % 5));
      }
      batch.add(logits, p, penalties);
    }
    EXPECT_EQ(batch.run(host_body()), batch.run(reference())) << "V = " << vocab;
  }
}

// sample_exp and sample_log stay within a few float ulps of the true values over the ranges the
// rules use: e^x for x in [-23, 0] (top-p masses), log x for x in (0, 18] (the Gumbel noise, and
// min-p, which may be subnormal).
TEST(SampleMath, ExpAndLogAreAccurate) {
  auto ulps = [](float got, double want) {
    return std::fabs(got - want) / (std::nextafter(static_cast<float>(std::fabs(want)), INFINITY) -
                                    static_cast<float>(std::fabs(want)));
  };
  double worst_exp = 0, worst_log = 0;
  for (float x = -23; x <= 0; x += 1.0f / 1024) {
    worst_exp = std::max(worst_exp, ulps(kernels::llm::sample_exp(x), std::exp(static_cast<double>(x))));
  }
  std::vector<float> xs = {1e-45f, 1e-44f, 1e-40f};  // subnormal
  for (float x = 1e-37f; x < 18; x *= 1.0001f) xs.push_back(x);
  for (float x : xs) {
    if (x != 1) worst_log = std::max(worst_log, ulps(kernels::llm::sample_log(x), std::log(static_cast<double>(x))));
  }
  std::cout << "[ accuracy ] sample_exp " << worst_exp << " ulp, sample_log " << worst_log << " ulp\n";
  EXPECT_LE(worst_exp, 2);
  EXPECT_LE(worst_log, 2);
  EXPECT_EQ(kernels::llm::sample_exp(0), 1.0f);
  EXPECT_EQ(kernels::llm::sample_log(1), 0.0f);
}

}  // namespace
}  // namespace evt::testing::llm
