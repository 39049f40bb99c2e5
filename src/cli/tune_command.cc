#include "cli/tune_command.h"

#include <fmt/format.h>

#include <algorithm>
#include <memory>
#include <random>

#include "cli/command_exit.h"
#include "cli/decode_batch.h"
#include "cli/decoder_flags.h"
#include "model/tuning_table.h"
#include "util/int_math.h"

namespace evt::cli {

namespace {

struct TuneArgs {
  DecoderFlags decoder;
  std::vector<int64_t> batches = {1, 4, 16, 64};
  std::vector<int64_t> contexts = {512};
  int reps = 10;
  int warmup = 3;
  std::string out;
};

// 1, 2, 4, ... up to `most`, and `also` (the default) among them.
std::vector<int64_t> split_candidates(int64_t most, int64_t also) {
  std::vector<int64_t> v;
  for (int64_t s = 1; s <= most; s *= 2) v.push_back(s);
  if (std::find(v.begin(), v.end(), also) == v.end()) v.push_back(also);
  std::sort(v.begin(), v.end());
  return v;
}

// One (batch, context): the default tiling's step, then each KV split count at the default QKV
// splits, then each QKV split count at the best KV splits (the two interact little: the QKV
// projection and attention are different stages). The entry keeps the fastest, the default's
// splits when nothing beat it.
model::TunedTiling tune_one(model::Decoder& d, const model::StepBatch& b, const TuneArgs& a) {
  const model::ModelConfig& c = d.config();
  const int64_t tokens = b.tokens(), context = b.longest_context();
  const std::string shape = fmt::format("B = {}, context {}", tokens, context);
  if (!d.set_tuning(nullptr).ok()) fail(kFailed, "cannot clear the tuning table");
  const model::Tiling base = d.step_tiling(tokens, context);
  model::TunedTiling best{tokens, context, base.qkv_splits, ceil_div(context, base.kv_split_len), 0, 0};
  best.default_ms = best.ms = median_step_ms(d, b, a.warmup, a.reps, shape + ", default splits");
  fmt::print("{:>5} {:>7} {:>10} {:>9} {:>9.3f}  (default)\n", tokens, context, best.qkv_splits, best.kv_splits,
             best.ms);
  const auto measure = [&](int64_t qkv, int64_t kv) {
    if (qkv == best.qkv_splits && kv == best.kv_splits) return;
    auto table = std::make_shared<model::TuningTable>();
    table->shapes = model::model_shapes(c);
    table->entries.push_back({tokens, context, qkv, kv, 0, 0});
    if (const Status s = d.set_tuning(table); !s.ok()) fail(kFailed, s.message());
    const double ms =
        median_step_ms(d, b, a.warmup, a.reps, fmt::format("{}, {} QKV splits, {} KV splits", shape, qkv, kv));
    fmt::print("{:>5} {:>7} {:>10} {:>9} {:>9.3f}\n", tokens, context, qkv, kv, ms);
    if (ms < best.ms) best.qkv_splits = qkv, best.kv_splits = kv, best.ms = ms;
  };
  const int64_t default_qkv = best.qkv_splits;
  // Each KV split at least 32 positions, each QKV split at least 256 columns (8 weight tiles).
  for (int64_t kv : split_candidates(std::max<int64_t>(1, context / 32), best.kv_splits)) measure(default_qkv, kv);
  const int64_t best_kv = best.kv_splits;
  for (int64_t qkv : split_candidates(std::max<int64_t>(1, c.hidden_size / 256), default_qkv)) measure(qkv, best_kv);
  return best;
}

void run_tune(const TuneArgs& a) {
  // Every candidate replaces the decoder's table, so a --tuning table would be measured nowhere.
  if (!a.decoder.tuning.empty()) fail(kUsage, "--tuning: tune measures split counts itself and writes its own table");
  const int64_t most_batch = *std::max_element(a.batches.begin(), a.batches.end());
  const int64_t most_ctx = *std::max_element(a.contexts.begin(), a.contexts.end());
  const int64_t pages = most_batch * (most_ctx / a.decoder.page_size + 1);
  MadeDecoder made = make_decoder(a.decoder, pages, pages);
  model::Decoder& d = *made.decoder;
  fmt::print("tuning {} on {}\n", model::model_shapes(d.config()), d.describe());
  fmt::print("{:>5} {:>7} {:>10} {:>9} {:>9}\n", "B", "context", "QKV splits", "KV splits", "ms/step");
  model::TuningTable table;
  table.shapes = model::model_shapes(d.config());
  table.device = d.describe();
  table.exec = a.decoder.exec;
  std::mt19937 rng(1);
  for (int64_t batch : a.batches) {
    for (int64_t ctx : a.contexts) {
      table.entries.push_back(tune_one(d, decode_batch(d.config(), batch, ctx, a.decoder.page_size, rng), a));
    }
  }
  fmt::print("\n{:>5} {:>7} {:>10} {:>9} {:>11} {:>9}\n", "B", "context", "QKV splits", "KV splits", "default ms",
             "tuned ms");
  for (const model::TunedTiling& e : table.entries) {
    fmt::print("{:>5} {:>7} {:>10} {:>9} {:>11.3f} {:>9.3f}\n", e.tokens, e.context, e.qkv_splits, e.kv_splits,
               e.default_ms, e.ms);
  }
  if (const Status s = model::save_tuning_table(a.out, table); !s.ok()) fail(kFailed, s.message());
  fmt::print("wrote {}\n", a.out);
}

}  // namespace

void add_tune_command(CLI::App& app) {
  auto a = std::make_shared<TuneArgs>();
  CLI::App* cmd = app.add_subcommand(
      "tune",
      "Measure the split counts of each decode step shape offline and write the tuning table that generate, serve "
      "and the benchmarks take with --tuning: for each batch size and context, the K splits of the QKV projection "
      "and the KV splits of attention that gave the fastest step (default_tiling's rules where nothing beat them)");
  add_decoder_flags(*cmd, a->decoder, "enough for the largest --batch at the largest --ctx");
  cmd->add_option("--batch", a->batches, "batch sizes (sequences, one new token each), comma-separated")
      ->delimiter(',')
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{4096}));
  cmd->add_option("--ctx", a->contexts, "cached positions per sequence, comma-separated")
      ->delimiter(',')
      ->capture_default_str()
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 20));
  cmd->add_option("--reps", a->reps, "timed steps per candidate (the median counts)")
      ->check(CLI::Range(1, 100000))
      ->capture_default_str();
  cmd->add_option("--warmup", a->warmup, "untimed steps before each candidate's")
      ->check(CLI::Range(0, 1000))
      ->capture_default_str();
  cmd->add_option("--out", a->out, "the tuning table to write (JSON)")->required();
  cmd->callback([a] { run_tune(*a); });
}

}  // namespace evt::cli
