#pragma once
// Scratch directories and hand-made files for the model tests.

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "model/config.h"
#include "model/safetensors_writer.h"

namespace evt::model::testing {

// A fresh directory per test, removed afterwards.
class ScratchDir {
 public:
  ScratchDir() {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    path_ = std::filesystem::path(::testing::TempDir()) /
            ("evt_model_" + std::to_string(::getpid()) + "_" + info->test_suite_name() + "_" + info->name());
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~ScratchDir() { std::filesystem::remove_all(path_); }
  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path operator/(const std::string& name) const { return path_ / name; }

 private:
  std::filesystem::path path_;
};

inline void write_file(const std::filesystem::path& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

// A safetensors file exactly as given: the header text is not padded, and `data` follows it.
inline void write_raw_safetensors(const std::filesystem::path& path, const std::string& header,
                                  const std::string& data, uint64_t header_bytes_field) {
  std::string bytes(8, '\0');
  for (int i = 0; i < 8; ++i) bytes[i] = static_cast<char>((header_bytes_field >> (8 * i)) & 0xff);
  write_file(path, bytes + header + data);
}
inline void write_raw_safetensors(const std::filesystem::path& path, const std::string& header,
                                  const std::string& data) {
  write_raw_safetensors(path, header, data, header.size());
}

// Writes tensors whose bytes are `bytes[i]` (each must match its spec's size).
inline void write_tensors(const std::filesystem::path& path, const std::vector<TensorSpec>& specs,
                          const std::vector<std::vector<std::byte>>& bytes) {
  auto writer = SafetensorsWriter::create(path, specs);
  ASSERT_TRUE(writer.ok()) << writer.status().message();
  for (const auto& b : bytes) ASSERT_TRUE(writer->write(b).ok());
  ASSERT_TRUE(writer->finish().ok());
}

template <typename T>
std::vector<std::byte> as_byte_vector(const std::vector<T>& values) {
  std::vector<std::byte> out(values.size() * sizeof(T));
  std::memcpy(out.data(), values.data(), out.size());
  return out;
}

// Small enough to write and read in milliseconds, with every dimension distinct so that a
// swapped dimension cannot pass a shape check.
// kQwen3Moe: layer 0 dense (mlp_only_layers), layer 1 sparse with 5 experts of 40, top 2.
inline ModelConfig tiny_config(Architecture arch) {
  const bool qwen = arch != Architecture::kLlama;
  std::optional<MoeConfig> moe;
  if (arch == Architecture::kQwen3Moe) {
    moe = MoeConfig{.num_experts = 5, .num_experts_per_tok = 2, .moe_intermediate_size = 40,
                    .norm_topk_prob = true, .mlp_only_layers = {0}};
  }
  return {.architecture = arch,
          .hidden_size = 64,
          .intermediate_size = 96,
          .num_layers = 2,
          .num_heads = 4,
          .num_kv_heads = 2,
          .head_dim = qwen ? 24 : 16,
          .vocab_size = 300,
          .max_position_embeddings = 512,
          .rms_norm_eps = 1e-6,
          .rope_theta = qwen ? 1e6 : 500000.0,
          .rope_scaling = qwen ? std::nullopt : std::optional(Llama3RopeScaling{}),
          .tie_word_embeddings = qwen,
          .qk_norm = qwen,
          .moe = moe,
          .bos_token_id = 1,
          .eos_token_ids = {2, 3}};
}

}  // namespace evt::model::testing
