// load_weights: names and shapes from the config, in-place bf16, fp16/fp32 conversion, and the
// errors for wrong checkpoints.

#include "model/weights.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>

#include "model/bf16.h"
#include "test_files.h"

namespace evt::model {
namespace {

using testing::as_byte_vector;
using testing::ScratchDir;
using testing::tiny_config;
using testing::write_raw_safetensors;
using testing::write_tensors;

// Element i of tensor k holds m / 8 with m = (k + i) % 7: exact in every dtype, so a
// converted value can be checked bit for bit.
float test_value(size_t k, size_t i) { return float((k + i) % 7) / 8; }

// Writes `specs` as model.safetensors in `dtype`, filled with test_value.
void write_checkpoint(const std::filesystem::path& dir, std::vector<TensorSpec> specs, DType dtype) {
  // m / 8 as IEEE half, m = 0..6.
  constexpr uint16_t kHalf[7] = {0x0000, 0x3000, 0x3400, 0x3600, 0x3800, 0x3900, 0x3a00};
  std::vector<std::vector<std::byte>> bytes;
  for (size_t k = 0; k < specs.size(); ++k) {
    specs[k].dtype = dtype;
    const size_t n = num_elements(specs[k].shape);
    std::vector<float> f32(n);
    std::vector<uint16_t> u16(n);
    for (size_t i = 0; i < n; ++i) {
      f32[i] = test_value(k, i);
      u16[i] = dtype == DType::kF16 ? kHalf[(k + i) % 7] : float_to_bf16(f32[i]);
    }
    bytes.push_back(dtype == DType::kF32 ? as_byte_vector(f32) : as_byte_vector(u16));
  }
  write_tensors(dir / kSingleFileName, specs, bytes);
}

TEST(Weights, SpecsFollowHuggingFaceNamesAndShapes) {
  const ModelConfig c = tiny_config(Architecture::kQwen3);  // hidden 64, heads 4 x 24, kv 2, inter 96
  const std::vector<TensorSpec> specs = model_tensor_specs(c);
  ASSERT_EQ(specs.size(), 1 + 2 * 11 + 1u);  // tied: no lm_head
  EXPECT_EQ(specs[0].name, "model.embed_tokens.weight");
  EXPECT_EQ(specs[0].shape, (std::vector<int64_t>{300, 64}));
  const std::vector<std::pair<std::string, std::vector<int64_t>>> layer1 = {
      {"model.layers.1.input_layernorm.weight", {64}},
      {"model.layers.1.self_attn.q_proj.weight", {96, 64}},
      {"model.layers.1.self_attn.k_proj.weight", {48, 64}},
      {"model.layers.1.self_attn.v_proj.weight", {48, 64}},
      {"model.layers.1.self_attn.o_proj.weight", {64, 96}},
      {"model.layers.1.self_attn.q_norm.weight", {24}},
      {"model.layers.1.self_attn.k_norm.weight", {24}},
      {"model.layers.1.post_attention_layernorm.weight", {64}},
      {"model.layers.1.mlp.gate_proj.weight", {96, 64}},
      {"model.layers.1.mlp.up_proj.weight", {96, 64}},
      {"model.layers.1.mlp.down_proj.weight", {64, 96}},
  };
  for (size_t i = 0; i < layer1.size(); ++i) {
    EXPECT_EQ(specs[12 + i].name, layer1[i].first);
    EXPECT_EQ(specs[12 + i].shape, layer1[i].second) << layer1[i].first;
  }
  EXPECT_EQ(specs.back().name, "model.norm.weight");

  const std::vector<TensorSpec> llama = model_tensor_specs(tiny_config(Architecture::kLlama));
  ASSERT_EQ(llama.size(), 1 + 2 * 9 + 2u);  // no q/k norm; untied: lm_head last
  EXPECT_EQ(llama.back().name, "lm_head.weight");
  EXPECT_EQ(llama.back().shape, (std::vector<int64_t>{300, 64}));
  EXPECT_EQ(llama[2].name, "model.layers.0.self_attn.q_proj.weight");
  EXPECT_EQ(llama[2].shape, (std::vector<int64_t>{64, 64}));  // 4 heads x 16
}

// A sparse layer holds the router and per-expert MLPs under the names transformers saves
// (Qwen3MoeSparseMoeBlock: mlp.gate, mlp.experts.E.*), a dense layer of the same model the MLP.
TEST(Weights, MoeSpecsFollowHuggingFaceNamesAndShapes) {
  const ModelConfig c = tiny_config(Architecture::kQwen3Moe);  // layer 0 dense, layer 1: 5 experts of 40
  const std::vector<TensorSpec> specs = model_tensor_specs(c);
  ASSERT_EQ(specs.size(), 1 + 11 + (8 + 1 + 5 * 3) + 1u);
  EXPECT_EQ(specs[9].name, "model.layers.0.mlp.gate_proj.weight");
  const std::vector<std::pair<std::string, std::vector<int64_t>>> sparse = {
      {"model.layers.1.post_attention_layernorm.weight", {64}},
      {"model.layers.1.mlp.gate.weight", {5, 64}},
      {"model.layers.1.mlp.experts.0.gate_proj.weight", {40, 64}},
      {"model.layers.1.mlp.experts.0.up_proj.weight", {40, 64}},
      {"model.layers.1.mlp.experts.0.down_proj.weight", {64, 40}},
      {"model.layers.1.mlp.experts.1.gate_proj.weight", {40, 64}},
  };
  for (size_t i = 0; i < sparse.size(); ++i) {
    EXPECT_EQ(specs[19 + i].name, sparse[i].first);
    EXPECT_EQ(specs[19 + i].shape, sparse[i].second) << sparse[i].first;
  }
  EXPECT_EQ(specs[specs.size() - 2].name, "model.layers.1.mlp.experts.4.down_proj.weight");
}

TEST(Weights, MissingExpertOrRouterIsNamed) {
  for (const char* missing : {"model.layers.1.mlp.experts.3.up_proj.weight", "model.layers.1.mlp.gate.weight",
                              "model.layers.0.mlp.down_proj.weight"}) {
    SCOPED_TRACE(missing);
    ScratchDir dir;
    const ModelConfig c = tiny_config(Architecture::kQwen3Moe);
    std::vector<TensorSpec> specs = model_tensor_specs(c);
    std::erase_if(specs, [&](const TensorSpec& t) { return t.name == missing; });
    write_checkpoint(dir.path(), specs, DType::kBF16);
    auto ckpt = Checkpoint::open(dir.path());
    ASSERT_TRUE(ckpt.ok()) << ckpt.status().message();
    auto w = load_weights(c, *ckpt);
    ASSERT_FALSE(w.ok());
    EXPECT_EQ(w.status().message(), (dir / kSingleFileName).string() + ": missing tensor " + missing);
  }
}

TEST(Weights, Bf16LoadsInPlaceAndTiedHeadAliasesEmbeddings) {
  ScratchDir dir;
  const ModelConfig c = tiny_config(Architecture::kQwen3);
  write_checkpoint(dir.path(), model_tensor_specs(c), DType::kBF16);
  auto ckpt = Checkpoint::open(dir.path());
  ASSERT_TRUE(ckpt.ok()) << ckpt.status().message();
  auto w = load_weights(c, *ckpt);
  ASSERT_TRUE(w.ok()) << w.status().message();
  ASSERT_EQ(w->layers.size(), 2u);
  const Bf16Tensor& up = w->layers[1].up_proj;
  EXPECT_EQ(up.name, "model.layers.1.mlp.up_proj.weight");
  EXPECT_EQ(up.shape, (std::vector<int64_t>{96, 64}));
  EXPECT_EQ(up.converted, nullptr);
  auto ref = ckpt->find(up.name);
  EXPECT_EQ(static_cast<const void*>(up.values.data()), static_cast<const void*>(ref->data));
  ASSERT_TRUE(w->layers[0].q_norm && w->layers[0].k_norm);
  EXPECT_EQ(w->layers[0].k_norm->shape, (std::vector<int64_t>{24}));
  EXPECT_EQ(w->lm_head.values.data(), w->embed_tokens.values.data());
  EXPECT_EQ(w->lm_head.shape, w->embed_tokens.shape);
}

TEST(Weights, ConvertsFp32AndFp16ToBf16AndReportsProgress) {
  for (DType dtype : {DType::kF32, DType::kF16}) {
    SCOPED_TRACE(std::string(dtype_name(dtype)));
    ScratchDir dir;
    const ModelConfig c = tiny_config(Architecture::kLlama);
    const std::vector<TensorSpec> specs = model_tensor_specs(c);
    write_checkpoint(dir.path(), specs, dtype);
    auto ckpt = Checkpoint::open(dir.path());
    ASSERT_TRUE(ckpt.ok()) << ckpt.status().message();
    std::vector<std::pair<uint64_t, uint64_t>> calls;
    std::vector<std::string> names;
    LoadOptions options{.progress = [&](uint64_t done, uint64_t total, std::string_view name) {
      calls.emplace_back(done, total);
      names.emplace_back(name);
    }};
    auto w = load_weights(c, *ckpt, options);
    ASSERT_TRUE(w.ok()) << w.status().message();
    ASSERT_EQ(calls.size(), specs.size());
    uint64_t total = 0;
    for (const TensorSpec& t : specs) total += num_elements(t.shape) * dtype_size_bytes(dtype);
    EXPECT_EQ(calls.back(), std::make_pair(total, total));
    EXPECT_TRUE(std::is_sorted(calls.begin(), calls.end()));
    EXPECT_EQ(names.back(), "lm_head.weight");

    const Bf16Tensor& lm_head = w->lm_head;
    ASSERT_NE(lm_head.converted, nullptr);
    const size_t k = specs.size() - 1;
    for (size_t i = 0; i < lm_head.values.size(); ++i) {
      ASSERT_EQ(lm_head.values[i], float_to_bf16(test_value(k, i))) << i;
    }
    EXPECT_EQ(w->layers[1].down_proj.values[5], float_to_bf16(test_value(1 + 9 + 8, 5)));
  }
}

TEST(Weights, ToBf16RoundsFp32AndCopiesUnalignedBf16) {
  ScratchDir dir;
  // Ties and specials: 1 + 2^-8 rounds to even (1.0); NaN stays NaN; Inf stays Inf.
  const std::vector<uint32_t> f32_bits = {0x3f808000, 0x3f818000, 0x7f800001, 0xff800000};
  const std::string f32_bytes(reinterpret_cast<const char*>(f32_bits.data()), 16);
  write_raw_safetensors(dir / "f32.safetensors", R"({"x": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}})",
                        f32_bytes);
  auto f32 = SafetensorsFile::open(dir / "f32.safetensors");
  ASSERT_TRUE(f32.ok()) << f32.status().message();
  const Bf16Tensor x = to_bf16(*f32->find("x"));
  EXPECT_EQ(std::vector<uint16_t>(x.values.begin(), x.values.end()), (std::vector<uint16_t>{0x3f80, 0x3f82, 0x7fc0, 0xff80}));

  // A 1-byte offset puts the bf16 data at an odd address: it must be copied, not misread.
  write_raw_safetensors(dir / "odd.safetensors",
                        R"({"y": {"dtype": "BF16", "shape": [2], "data_offsets": [1, 5]}})",
                        std::string("\x00\x80\x3f\x00\x40", 5));
  auto odd = SafetensorsFile::open(dir / "odd.safetensors");
  ASSERT_TRUE(odd.ok()) << odd.status().message();
  const TensorRef& y_ref = *odd->find("y");
  ASSERT_NE(reinterpret_cast<uintptr_t>(y_ref.data) % 2, 0u) << "the header length should make the data odd";
  const Bf16Tensor y = to_bf16(y_ref);
  ASSERT_NE(y.converted, nullptr);
  EXPECT_EQ(std::vector<uint16_t>(y.values.begin(), y.values.end()), (std::vector<uint16_t>{0x3f80, 0x4000}));
}

TEST(Weights, WrongShapeNamesFileAndTensor) {
  ScratchDir dir;
  const ModelConfig c = tiny_config(Architecture::kLlama);
  std::vector<TensorSpec> specs = model_tensor_specs(c);
  auto up = std::find_if(specs.begin(), specs.end(),
                         [](const TensorSpec& t) { return t.name == "model.layers.1.mlp.up_proj.weight"; });
  ASSERT_NE(up, specs.end());
  up->shape = {64, 96};  // transposed
  write_checkpoint(dir.path(), specs, DType::kBF16);
  auto ckpt = Checkpoint::open(dir.path());
  ASSERT_TRUE(ckpt.ok()) << ckpt.status().message();
  auto w = load_weights(c, *ckpt);
  ASSERT_FALSE(w.ok());
  EXPECT_EQ(w.status().message(), (dir / kSingleFileName).string() +
                                      ": model.layers.1.mlp.up_proj.weight has shape [64, 96], expected [96, 64]");
}

TEST(Weights, MissingTensorIsNamed) {
  ScratchDir dir;
  const ModelConfig c = tiny_config(Architecture::kQwen3);
  std::vector<TensorSpec> specs = model_tensor_specs(c);
  std::erase_if(specs, [](const TensorSpec& t) { return t.name == "model.layers.0.self_attn.k_norm.weight"; });
  write_checkpoint(dir.path(), specs, DType::kBF16);
  auto ckpt = Checkpoint::open(dir.path());
  ASSERT_TRUE(ckpt.ok()) << ckpt.status().message();
  auto w = load_weights(c, *ckpt);
  ASSERT_FALSE(w.ok());
  EXPECT_EQ(w.status().message(),
            (dir / kSingleFileName).string() + ": missing tensor model.layers.0.self_attn.k_norm.weight");

}

TEST(Weights, UntiedConfigNeedsLmHead) {
  ScratchDir dir;
  const ModelConfig tied = tiny_config(Architecture::kQwen3);
  write_checkpoint(dir.path(), model_tensor_specs(tied), DType::kBF16);
  auto ckpt = Checkpoint::open(dir.path());
  ASSERT_TRUE(ckpt.ok()) << ckpt.status().message();
  ModelConfig untied = tied;
  untied.tie_word_embeddings = false;
  auto w = load_weights(untied, *ckpt);
  ASSERT_FALSE(w.ok());
  EXPECT_EQ(w.status().message(), (dir / kSingleFileName).string() + ": missing tensor lm_head.weight");
}

}  // namespace
}  // namespace evt::model
