// config.json parsing: the real files of both architectures, and the errors users meet.

#include "model/config.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "model/presets.h"

namespace evt::model {
namespace {

using nlohmann::json;

// Qwen/Qwen3-0.6B's config.json (rope_theta is an integer there).
const char* kQwen3Config = R"({
  "architectures": ["Qwen3ForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
  "bos_token_id": 151643, "eos_token_id": 151645, "head_dim": 128, "hidden_act": "silu",
  "hidden_size": 1024, "initializer_range": 0.02, "intermediate_size": 3072,
  "max_position_embeddings": 40960, "max_window_layers": 28, "model_type": "qwen3",
  "num_attention_heads": 16, "num_hidden_layers": 28, "num_key_value_heads": 8,
  "rms_norm_eps": 1e-06, "rope_scaling": null, "rope_theta": 1000000, "sliding_window": null,
  "tie_word_embeddings": true, "torch_dtype": "bfloat16", "transformers_version": "4.51.0",
  "use_cache": true, "use_sliding_window": false, "vocab_size": 151936})";

// meta-llama/Llama-3.1-8B-Instruct's config.json: no head_dim, a list of eos ids.
const char* kLlamaConfig = R"({
  "architectures": ["LlamaForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
  "bos_token_id": 128000, "eos_token_id": [128001, 128008, 128009], "hidden_act": "silu",
  "hidden_size": 4096, "initializer_range": 0.02, "intermediate_size": 14336,
  "max_position_embeddings": 131072, "mlp_bias": false, "model_type": "llama",
  "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 8, "pretraining_tp": 1,
  "rms_norm_eps": 1e-05,
  "rope_scaling": {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                   "original_max_position_embeddings": 8192, "rope_type": "llama3"},
  "rope_theta": 500000.0, "tie_word_embeddings": false, "torch_dtype": "bfloat16",
  "transformers_version": "4.43.0.dev0", "use_cache": true, "vocab_size": 128256})";

// The message of parsing `base` with `edit` applied (expecting a failure).
std::string error_of(const char* base, const std::function<void(json&)>& edit) {
  json j = json::parse(base);
  edit(j);
  auto c = parse_config(j.dump(), "models/x/config.json");
  EXPECT_FALSE(c.ok());
  return c.status().message();
}

TEST(Config, ParsesQwen3) {
  auto c = parse_config(kQwen3Config, "config.json");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->architecture, Architecture::kQwen3);
  EXPECT_EQ(c->hidden_size, 1024);
  EXPECT_EQ(c->intermediate_size, 3072);
  EXPECT_EQ(c->num_layers, 28);
  EXPECT_EQ(c->num_heads, 16);
  EXPECT_EQ(c->num_kv_heads, 8);
  EXPECT_EQ(c->head_dim, 128);  // not hidden / heads = 64
  EXPECT_EQ(c->vocab_size, 151936);
  EXPECT_EQ(c->max_position_embeddings, 40960);
  EXPECT_EQ(c->rms_norm_eps, 1e-6);
  EXPECT_EQ(c->rope_theta, 1e6);
  EXPECT_FALSE(c->rope_scaling.has_value());
  EXPECT_TRUE(c->tie_word_embeddings);
  EXPECT_TRUE(c->qk_norm);
  EXPECT_EQ(c->bos_token_id, 151643);
  EXPECT_EQ(c->eos_token_ids, std::vector<int64_t>{151645});
  EXPECT_EQ(c->torch_dtype, "bfloat16");
  EXPECT_EQ(*c, *preset_config("qwen3-0.6b"));
}

TEST(Config, ParsesLlama31) {
  auto c = parse_config(kLlamaConfig, "config.json");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->architecture, Architecture::kLlama);
  EXPECT_EQ(c->head_dim, 128);  // derived: 4096 / 32
  EXPECT_FALSE(c->qk_norm);
  EXPECT_FALSE(c->tie_word_embeddings);
  EXPECT_EQ(c->rms_norm_eps, 1e-5);
  ASSERT_TRUE(c->rope_scaling.has_value());
  EXPECT_EQ(c->rope_scaling->factor, 8.0);
  EXPECT_EQ(c->rope_scaling->low_freq_factor, 1.0);
  EXPECT_EQ(c->rope_scaling->high_freq_factor, 4.0);
  EXPECT_EQ(c->rope_scaling->original_max_position_embeddings, 8192);
  EXPECT_EQ(c->eos_token_ids, (std::vector<int64_t>{128001, 128008, 128009}));
  EXPECT_EQ(*c, *preset_config("llama-3.1-8b"));
}

TEST(Config, LlamaHeadDimKeyWinsOverTheDerivedOne) {
  json j = json::parse(kLlamaConfig);
  j["head_dim"] = 64;
  auto c = parse_config(j.dump(), "config.json");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->head_dim, 64);
}

TEST(Config, ReadsTransformers5RopeParameters) {
  json j = json::parse(kLlamaConfig);
  j["rope_parameters"] = j["rope_scaling"];
  j["rope_parameters"]["rope_theta"] = 500000.0;
  j.erase("rope_scaling");
  j.erase("rope_theta");
  j.erase("torch_dtype");
  j["dtype"] = "float16";
  auto c = parse_config(j.dump(), "config.json");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->rope_theta, 500000.0);
  ASSERT_TRUE(c->rope_scaling.has_value());
  EXPECT_EQ(c->rope_scaling->factor, 8.0);
  EXPECT_EQ(c->torch_dtype, "float16");
}

TEST(Config, DefaultRopeTypeMeansNoScaling) {
  json j = json::parse(kQwen3Config);
  j["rope_scaling"] = {{"type", "default"}};
  auto c = parse_config(j.dump(), "config.json");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_FALSE(c->rope_scaling.has_value());
}

TEST(Config, MissingKeyNamesFileAndKey) {
  EXPECT_EQ(error_of(kQwen3Config, [](json& j) { j.erase("hidden_size"); }),
            "models/x/config.json: missing key 'hidden_size'");
  EXPECT_EQ(error_of(kQwen3Config, [](json& j) { j.erase("head_dim"); }),
            "models/x/config.json: missing key 'head_dim'");
  EXPECT_EQ(error_of(kLlamaConfig, [](json& j) { j["rope_scaling"].erase("low_freq_factor"); }),
            "models/x/config.json: missing key 'rope_scaling.low_freq_factor'");
  EXPECT_EQ(error_of(kLlamaConfig, [](json& j) { j.erase("architectures"); }),
            "models/x/config.json: missing key 'architectures'");
}

TEST(Config, WrongTypeNamesKeyAndValue) {
  EXPECT_EQ(error_of(kQwen3Config, [](json& j) { j["hidden_size"] = "1024"; }),
            "models/x/config.json: key 'hidden_size' must be an integer, got \"1024\" (string)");
  EXPECT_EQ(error_of(kQwen3Config, [](json& j) { j["num_hidden_layers"] = 28.5; }),
            "models/x/config.json: key 'num_hidden_layers' must be an integer, got 28.5 (number)");
  EXPECT_EQ(error_of(kQwen3Config, [](json& j) { j["tie_word_embeddings"] = 1; }),
            "models/x/config.json: key 'tie_word_embeddings' must be true or false, got 1 (integer)");
  EXPECT_EQ(error_of(kLlamaConfig, [](json& j) { j["eos_token_id"] = {128001, "x"}; }),
            "models/x/config.json: key 'eos_token_id' must be an integer or a list of integers, got "
            "[128001,\"x\"] (array)");
}

TEST(Config, RefusesUnsupportedArchitecturesAndFeatures) {
  EXPECT_EQ(error_of(kQwen3Config, [](json& j) { j["architectures"] = {"Qwen3MoeForCausalLM"}; }),
            "models/x/config.json: Qwen3MoeForCausalLM is not supported yet (supported: Qwen3ForCausalLM, "
            "LlamaForCausalLM)");
  EXPECT_EQ(error_of(kLlamaConfig, [](json& j) { j["rope_scaling"]["rope_type"] = "yarn"; }),
            "models/x/config.json: rope_scaling rope_type 'yarn' is not supported yet (supported: default, llama3)");
  EXPECT_EQ(error_of(kQwen3Config, [](json& j) { j["attention_bias"] = true; }),
            "models/x/config.json: 'attention_bias: true' is not supported yet");
  EXPECT_EQ(error_of(kLlamaConfig, [](json& j) { j["hidden_act"] = "gelu"; }),
            "models/x/config.json: hidden_act 'gelu' is not supported yet (only silu)");
}

TEST(Config, SanityChecks) {
  EXPECT_EQ(error_of(kQwen3Config, [](json& j) { j["num_key_value_heads"] = 3; }),
            "models/x/config.json: num_attention_heads 16 is not a multiple of num_key_value_heads 3");
  EXPECT_EQ(error_of(kQwen3Config, [](json& j) { j["intermediate_size"] = 0; }),
            "models/x/config.json: intermediate_size must be positive, got 0");
  EXPECT_EQ(error_of(kQwen3Config, [](json& j) { j["eos_token_id"] = 151936; }),
            "models/x/config.json: eos_token_id 151936 is outside the vocabulary");
  EXPECT_EQ(error_of(kLlamaConfig, [](json& j) { j["num_attention_heads"] = 24; j["num_key_value_heads"] = 24; }),
            "models/x/config.json: no head_dim, and hidden_size 4096 is not divisible by num_attention_heads 24");
  EXPECT_EQ(error_of(kLlamaConfig, [](json& j) { j["rope_scaling"]["high_freq_factor"] = 1.0; }),
            "models/x/config.json: llama3 rope scaling needs high_freq_factor (1) > low_freq_factor (1)");
}

TEST(Config, BadJsonAndMissingFile) {
  auto c = parse_config("{\"hidden_size\": ", "a/config.json");
  ASSERT_FALSE(c.ok());
  EXPECT_TRUE(c.status().message().starts_with("a/config.json: not valid JSON: ")) << c.status().message();
  auto missing = load_config("/nonexistent/config.json");
  ASSERT_FALSE(missing.ok());
  EXPECT_TRUE(missing.status().message().starts_with("/nonexistent/config.json: cannot open")) << missing.status().message();
}

TEST(Config, HfJsonRoundTripsEveryPreset) {
  for (const std::string& name : preset_names()) {
    SCOPED_TRACE(name);
    const ModelConfig c = *preset_config(name);
    const std::string text = to_hf_config_json(c);
    auto back = parse_config(text, name);
    ASSERT_TRUE(back.ok()) << back.status().message();
    EXPECT_EQ(*back, c);
    const json j = json::parse(text);
    EXPECT_EQ(j["model_type"], architecture_name(c.architecture));
    EXPECT_EQ(j["architectures"][0], hf_architecture_name(c.architecture));
  }
}

}  // namespace
}  // namespace evt::model
