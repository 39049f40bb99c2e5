// Random checkpoints: loadable by our loader, deterministic, sharded like transformers, and the
// presets' shapes; plus the make-model command line.

#include "model/make_model.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "model/bf16.h"
#include "model/presets.h"
#include "model/weights.h"
#include "support/run_binary.h"
#include "test_files.h"

namespace evt::model {
namespace {

using testing::ScratchDir;
using testing::tiny_config;

std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

Expected<ModelWeights> load(const std::filesystem::path& dir, const ModelConfig& config,
                            std::optional<Checkpoint>& keep) {
  EVT_ASSIGN_OR_RETURN(keep, Checkpoint::open(dir));
  return load_weights(config, *keep);
}

TEST(MakeModel, TinyModelsLoadBack) {
  for (Architecture arch : {Architecture::kQwen3, Architecture::kLlama, Architecture::kQwen3Moe}) {
    SCOPED_TRACE(std::string(architecture_name(arch)));
    ScratchDir dir;
    const ModelConfig c = tiny_config(arch);
    auto written = write_random_model(c, dir / "m", {.seed = 7});
    ASSERT_TRUE(written.ok()) << written.status().message();
    EXPECT_EQ(written->num_shards, 1);
    uint64_t params = 0;
    for (const TensorSpec& t : model_tensor_specs(c)) params += num_elements(t.shape);
    EXPECT_EQ(written->num_parameters, params);
    EXPECT_EQ(written->total_bytes, 2 * params);
    EXPECT_FALSE(std::filesystem::exists(dir / "m" / kIndexFileName));

    auto config = load_config(dir / "m" / "config.json");
    ASSERT_TRUE(config.ok()) << config.status().message();
    EXPECT_EQ(*config, c);
    auto file = SafetensorsFile::open(dir / "m" / kSingleFileName);
    ASSERT_TRUE(file.ok()) << file.status().message();
    EXPECT_EQ(file->metadata().at("format"), "pt");  // transformers refuses files without it

    std::optional<Checkpoint> ckpt;
    auto w = load(dir / "m", c, ckpt);
    ASSERT_TRUE(w.ok()) << w.status().message();
    for (const LayerWeights& l : w->layers) {
      for (const Bf16Tensor* norm : {&l.input_layernorm, &l.post_attention_layernorm}) {
        EXPECT_TRUE(std::all_of(norm->values.begin(), norm->values.end(), [](uint16_t v) { return v == 0x3f80; }))
            << norm->name;
      }
      EXPECT_EQ(l.q_norm.has_value(), arch != Architecture::kLlama);
    }
    if (arch == Architecture::kQwen3Moe) {  // layer 0 dense (mlp_only_layers), layer 1 sparse
      EXPECT_FALSE(w->layers[0].router.has_value());
      EXPECT_EQ(w->layers[0].gate_proj.shape, (std::vector<int64_t>{96, 64}));
      ASSERT_TRUE(w->layers[1].router.has_value());
      EXPECT_EQ(w->layers[1].router->shape, (std::vector<int64_t>{5, 64}));
      ASSERT_EQ(w->layers[1].experts.size(), 5u);
      EXPECT_EQ(w->layers[1].experts[4].down_proj.name, "model.layers.1.mlp.experts.4.down_proj.weight");
      EXPECT_EQ(w->layers[1].experts[4].down_proj.shape, (std::vector<int64_t>{64, 40}));
      EXPECT_TRUE(w->layers[1].gate_proj.values.empty());
    }
    // Matrices: mean 0 and standard deviation 0.02, within what 19200 draws allow.
    double sum = 0, sum_sq = 0;
    for (uint16_t v : w->embed_tokens.values) {
      const double x = bf16_to_float(v);
      sum += x;
      sum_sq += x * x;
    }
    const double n = w->embed_tokens.values.size();
    EXPECT_NEAR(sum / n, 0.0, 0.001);
    EXPECT_NEAR(std::sqrt(sum_sq / n), 0.02, 0.0005);
  }
}

TEST(MakeModel, SameSeedSameBytes) {
  ScratchDir dir;
  const ModelConfig c = tiny_config(Architecture::kLlama);
  for (const char* name : {"a", "b"}) ASSERT_TRUE(write_random_model(c, dir / name, {.seed = 3}).ok());
  ASSERT_TRUE(write_random_model(c, dir / "c", {.seed = 4}).ok());
  const std::string a = read_file(dir / "a" / kSingleFileName);
  EXPECT_EQ(a, read_file(dir / "b" / kSingleFileName));
  EXPECT_NE(a, read_file(dir / "c" / kSingleFileName));
  EXPECT_EQ(a.size(), read_file(dir / "c" / kSingleFileName).size());
}

TEST(MakeModel, ShardsLikeTransformersWithTheSameValues) {
  ScratchDir dir;
  const ModelConfig c = tiny_config(Architecture::kLlama);
  constexpr uint64_t kMaxShardBytes = 40 << 10;  // the embeddings (37.5 KiB) nearly fill a shard
  std::vector<std::pair<uint64_t, uint64_t>> progress;
  auto sharded = write_random_model(
      c, dir / "sharded",
      {.seed = 5, .max_shard_bytes = kMaxShardBytes, .progress = [&](uint64_t done, uint64_t total, std::string_view) {
         progress.emplace_back(done, total);
       }});
  ASSERT_TRUE(sharded.ok()) << sharded.status().message();
  ASSERT_TRUE(write_random_model(c, dir / "single", {.seed = 5}).ok());
  EXPECT_GT(sharded->num_shards, 2);
  ASSERT_FALSE(progress.empty());
  EXPECT_EQ(progress.back(), std::make_pair(sharded->total_bytes, sharded->total_bytes));
  EXPECT_FALSE(std::filesystem::exists(dir / "sharded" / kSingleFileName));

  const nlohmann::json index = nlohmann::json::parse(read_file(dir / "sharded" / kIndexFileName));
  EXPECT_EQ(index["metadata"]["total_size"], sharded->total_bytes);
  EXPECT_EQ(index["weight_map"].size(), model_tensor_specs(c).size());
  const std::string last = fmt::format("model-{:05d}-of-{:05d}.safetensors", sharded->num_shards, sharded->num_shards);
  EXPECT_EQ(index["weight_map"]["lm_head.weight"], last);
  for (int s = 1; s <= sharded->num_shards; ++s) {
    const auto path =
        dir / "sharded" / fmt::format("model-{:05d}-of-{:05d}.safetensors", s, sharded->num_shards);
    auto shard = SafetensorsFile::open(path);
    ASSERT_TRUE(shard.ok()) << shard.status().message();
    uint64_t bytes = 0;
    for (const auto& [name, t] : shard->tensors()) bytes += t.size_bytes;
    EXPECT_LE(bytes, kMaxShardBytes) << path;
  }

  std::optional<Checkpoint> sharded_ckpt, single_ckpt;
  auto a = load(dir / "sharded", c, sharded_ckpt);
  auto b = load(dir / "single", c, single_ckpt);
  ASSERT_TRUE(a.ok()) << a.status().message();
  ASSERT_TRUE(b.ok()) << b.status().message();
  EXPECT_EQ(sharded_ckpt->num_files(), size_t(sharded->num_shards));
  auto same = [](const Bf16Tensor& x, const Bf16Tensor& y) {
    return std::equal(x.values.begin(), x.values.end(), y.values.begin(), y.values.end());
  };
  EXPECT_TRUE(same(a->embed_tokens, b->embed_tokens));
  EXPECT_TRUE(same(a->layers[1].down_proj, b->layers[1].down_proj));
  EXPECT_TRUE(same(a->lm_head, b->lm_head));
  EXPECT_FALSE(same(a->embed_tokens, a->lm_head));  // each tensor draws its own values
}

TEST(MakeModel, RefusesNonEmptyDirectory) {
  ScratchDir dir;
  testing::write_file(dir / "notes.txt", "mine");
  auto written = write_random_model(tiny_config(Architecture::kQwen3), dir.path(), {});
  ASSERT_FALSE(written.ok());
  EXPECT_EQ(written.status().message(),
            dir.path().string() + ": not empty; make-model writes into a new or empty directory");
}

// The published parameter counts: Qwen3 model cards give totals and non-embedding counts, in
// billions; Llama's are exact.
TEST(Presets, MatchPublishedParameterCounts) {
  const std::vector<std::tuple<std::string, double, double>> published = {
      {"qwen3-0.6b", 0.6, 0.44}, {"qwen3-1.7b", 1.7, 1.4},   {"qwen3-4b", 4.0, 3.6},
      {"qwen3-8b", 8.2, 6.95},   {"qwen3-14b", 14.8, 13.2},  {"qwen3-32b", 32.8, 31.2},
      {"qwen3-30b-a3b", 30.5, 29.9},
  };
  auto count = [](const ModelConfig& c, bool embeddings) {
    double n = 0;
    for (const TensorSpec& t : model_tensor_specs(c)) {
      if (embeddings || (t.name != "model.embed_tokens.weight" && t.name != "lm_head.weight")) {
        n += num_elements(t.shape);
      }
    }
    return n / 1e9;
  };
  for (const auto& [name, total, non_embedding] : published) {
    SCOPED_TRACE(name);
    const ModelConfig c = *preset_config(name);
    EXPECT_NEAR(count(c, true), total, 0.05);
    EXPECT_NEAR(count(c, false), non_embedding, 0.05);
  }
  EXPECT_EQ(count(*preset_config("llama-3.2-1b"), true), 1.2358144);
  EXPECT_EQ(count(*preset_config("llama-3.1-8b"), true), 8.030261248);
}

TEST(Presets, ShortNamesAndArchitecture) {
  for (const std::string& name : preset_names()) {
    SCOPED_TRACE(name);
    auto full = preset_config(name);
    ASSERT_TRUE(full.ok()) << full.status().message();
    EXPECT_TRUE(validate_config(*full, name).ok());
    EXPECT_EQ(full->qk_norm, full->architecture != Architecture::kLlama);
    EXPECT_EQ(full->moe.has_value(), full->architecture == Architecture::kQwen3Moe);
    const std::string prefix = std::string(architecture_family(full->architecture)) + "-";
    ASSERT_TRUE(name.starts_with(prefix));
    // Without the prefix, with and without --arch.
    auto short_name = preset_config(name.substr(prefix.size()));
    ASSERT_TRUE(short_name.ok()) << short_name.status().message();
    EXPECT_EQ(*short_name, *full);
    EXPECT_TRUE(preset_config(name.substr(prefix.size()), full->architecture).ok());
  }
  auto wrong_arch = preset_config("0.6b", Architecture::kLlama);
  ASSERT_FALSE(wrong_arch.ok());
  EXPECT_TRUE(wrong_arch.status().message().starts_with("no preset '0.6b' for llama (presets: qwen3-0.6b, "))
      << wrong_arch.status().message();
}

// --- eventide make-model

using evt::testing::CliResult;
CliResult eventide(const std::string& args) { return evt::testing::run_eventide(args); }

TEST(MakeModelCli, HelpExplainsEveryFlag) {
  const CliResult r = eventide("make-model --help");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  for (const char* flag : {"--arch", "--preset", "--random", "--seed", "--out", "qwen3-0.6b", "llama-3.1-8b"}) {
    EXPECT_NE(r.output.find(flag), std::string::npos) << flag << " in\n" << r.output;
  }
}

TEST(MakeModelCli, CommandLineErrorsExitWith2) {
  ScratchDir dir;
  const std::string out = " --out " + (dir / "m").string();
  CliResult r = eventide("make-model --preset 0.6b" + out);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_EQ(r.output, "error: make-model writes random weights only (there is no other source yet); pass --random\n");
  r = eventide("make-model --preset 70b --random" + out);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_TRUE(r.output.starts_with("error: no preset '70b' (presets: qwen3-0.6b, ")) << r.output;
  r = eventide("make-model --arch llama --preset 0.6b --random" + out);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_TRUE(r.output.starts_with("error: no preset '0.6b' for llama")) << r.output;
  EXPECT_FALSE(std::filesystem::exists(dir / "m"));
}

TEST(MakeModelCli, WriteFailureExitsWith1) {
  ScratchDir dir;
  testing::write_file(dir / "notes.txt", "mine");
  const CliResult r = eventide("make-model --preset 0.6b --random --out " + dir.path().string());
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_EQ(r.output, "error: " + dir.path().string() + ": not empty; make-model writes into a new or empty directory\n");
}

}  // namespace
}  // namespace evt::model
