// config.json parsing: the real files of every architecture, and the errors users meet.

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

// Qwen/Qwen3-30B-A3B's config.json (transformers 4.x spelling: num_experts).
const char* kQwen3MoeConfig = R"({
  "architectures": ["Qwen3MoeForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
  "bos_token_id": 151643, "decoder_sparse_step": 1, "eos_token_id": 151645, "head_dim": 128,
  "hidden_act": "silu", "hidden_size": 2048, "initializer_range": 0.02, "intermediate_size": 6144,
  "max_position_embeddings": 40960, "max_window_layers": 48, "mlp_only_layers": [],
  "model_type": "qwen3_moe", "moe_intermediate_size": 768, "norm_topk_prob": true,
  "num_attention_heads": 32, "num_experts": 128, "num_experts_per_tok": 8, "num_hidden_layers": 48,
  "num_key_value_heads": 4, "output_router_logits": false, "rms_norm_eps": 1e-06, "rope_scaling": null,
  "rope_theta": 1000000.0, "router_aux_loss_coef": 0.001, "sliding_window": null,
  "tie_word_embeddings": false, "torch_dtype": "bfloat16", "transformers_version": "4.51.0",
  "use_cache": true, "use_sliding_window": false, "vocab_size": 151936})";

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

TEST(Config, ParsesQwen3Moe) {
  auto c = parse_config(kQwen3MoeConfig, "config.json");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->architecture, Architecture::kQwen3Moe);
  EXPECT_TRUE(c->qk_norm);
  EXPECT_EQ(c->num_kv_heads, 4);
  ASSERT_TRUE(c->moe.has_value());
  EXPECT_EQ(c->moe->num_experts, 128);
  EXPECT_EQ(c->moe->num_experts_per_tok, 8);
  EXPECT_EQ(c->moe->moe_intermediate_size, 768);
  EXPECT_TRUE(c->moe->norm_topk_prob);
  EXPECT_EQ(c->moe->decoder_sparse_step, 1);
  EXPECT_TRUE(c->moe->mlp_only_layers.empty());
  for (int64_t l = 0; l < c->num_layers; ++l) EXPECT_TRUE(c->is_moe_layer(l)) << l;
  EXPECT_TRUE(c->has_moe_layers());
  EXPECT_FALSE(c->has_dense_layers());
  EXPECT_EQ(*c, *preset_config("qwen3-30b-a3b"));
  EXPECT_FALSE(parse_config(kQwen3Config, "config.json")->moe.has_value());
}

TEST(Config, ReadsTransformers5MoeSpellingAndDefaults) {
  // transformers 5.x writes num_local_experts; norm_topk_prob, decoder_sparse_step and
  // mlp_only_layers default as in Qwen3MoeConfig (false, 1, none).
  json j = json::parse(kQwen3MoeConfig);
  j["num_local_experts"] = j["num_experts"];
  for (const char* key : {"num_experts", "norm_topk_prob", "decoder_sparse_step"}) j.erase(key);
  j["mlp_only_layers"] = nullptr;
  auto c = parse_config(j.dump(), "config.json");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->moe->num_experts, 128);
  EXPECT_FALSE(c->moe->norm_topk_prob);
  EXPECT_EQ(c->moe->decoder_sparse_step, 1);
  EXPECT_TRUE(c->moe->mlp_only_layers.empty());
}

// transformers' Qwen3MoeDecoderLayer: sparse iff the layer is not in mlp_only_layers, there are
// experts, and (layer + 1) % decoder_sparse_step == 0.
TEST(Config, MoeLayersFollowTransformersRule) {
  json j = json::parse(kQwen3MoeConfig);
  j["num_hidden_layers"] = 7;
  j["decoder_sparse_step"] = 2;
  j["mlp_only_layers"] = {3, 4};
  auto c = parse_config(j.dump(), "config.json");
  ASSERT_TRUE(c.ok()) << c.status().message();
  std::vector<int64_t> sparse;
  for (int64_t l = 0; l < c->num_layers; ++l) {
    if (c->is_moe_layer(l)) sparse.push_back(l);
  }
  EXPECT_EQ(sparse, (std::vector<int64_t>{1, 5}));  // 3 is sparse by the step but listed dense
  EXPECT_TRUE(c->has_moe_layers());
  EXPECT_TRUE(c->has_dense_layers());
  j["num_experts"] = 0;
  c = parse_config(j.dump(), "config.json");
  ASSERT_TRUE(c.ok()) << c.status().message();
  for (int64_t l = 0; l < c->num_layers; ++l) EXPECT_FALSE(c->is_moe_layer(l)) << l;
  EXPECT_FALSE(c->has_moe_layers());
  EXPECT_TRUE(c->has_dense_layers());
}

TEST(Config, MoeErrorsNameFileAndField) {
  EXPECT_EQ(error_of(kQwen3MoeConfig, [](json& j) { j.erase("num_experts"); }),
            "models/x/config.json: missing key 'num_experts'");
  EXPECT_EQ(error_of(kQwen3MoeConfig, [](json& j) { j.erase("moe_intermediate_size"); }),
            "models/x/config.json: missing key 'moe_intermediate_size'");
  EXPECT_EQ(error_of(kQwen3MoeConfig, [](json& j) { j["num_experts_per_tok"] = 129; }),
            "models/x/config.json: num_experts_per_tok 129 must be between 1 and num_experts 128");
  EXPECT_EQ(error_of(kQwen3MoeConfig, [](json& j) { j["num_experts_per_tok"] = 0; }),
            "models/x/config.json: num_experts_per_tok 0 must be between 1 and num_experts 128");
  EXPECT_EQ(error_of(kQwen3MoeConfig, [](json& j) { j["moe_intermediate_size"] = 0; }),
            "models/x/config.json: moe_intermediate_size must be positive, got 0");
  EXPECT_EQ(error_of(kQwen3MoeConfig, [](json& j) { j["decoder_sparse_step"] = 0; }),
            "models/x/config.json: decoder_sparse_step must be positive, got 0");
  EXPECT_EQ(error_of(kQwen3MoeConfig, [](json& j) { j["mlp_only_layers"] = {0, 48}; }),
            "models/x/config.json: mlp_only_layers names layer 48, but the model has 48 layers");
  EXPECT_EQ(error_of(kQwen3MoeConfig, [](json& j) { j["mlp_only_layers"] = {"0"}; }),
            "models/x/config.json: key 'mlp_only_layers' must be a list of integers, got [\"0\"] (array)");
  EXPECT_EQ(error_of(kQwen3MoeConfig, [](json& j) { j["norm_topk_prob"] = "yes"; }),
            "models/x/config.json: key 'norm_topk_prob' must be true or false, got \"yes\" (string)");
  EXPECT_EQ(error_of(kQwen3MoeConfig, [](json& j) { j["num_experts"] = -1; }),
            "models/x/config.json: num_experts must not be negative, got -1");
  // A config built in code must not mix the architectures.
  ModelConfig dense_with_experts = *preset_config("qwen3-0.6b");
  dense_with_experts.moe = MoeConfig{.num_experts = 2, .num_experts_per_tok = 1, .moe_intermediate_size = 8};
  EXPECT_EQ(validate_config(dense_with_experts, "preset").message(), "preset: Qwen3ForCausalLM has no expert settings");
  ModelConfig moe_without = *preset_config("qwen3-30b-a3b");
  moe_without.moe.reset();
  EXPECT_EQ(validate_config(moe_without, "preset").message(), "preset: Qwen3MoeForCausalLM needs expert settings");
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
  EXPECT_EQ(error_of(kQwen3Config, [](json& j) { j["architectures"] = {"MixtralForCausalLM"}; }),
            "models/x/config.json: MixtralForCausalLM is not supported yet (supported: Qwen3ForCausalLM, "
            "LlamaForCausalLM, Qwen3MoeForCausalLM)");
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
