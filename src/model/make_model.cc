#include "model/make_model.h"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string_view>
#include <vector>

#include "model/bf16.h"
#include "model/checkpoint.h"
#include "model/safetensors_writer.h"
#include "model/weights.h"

namespace evt::model {

namespace {

uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// xoshiro256+ (Blackman and Vigna): fast, and its upper bits, the ones used here, are strong.
class Xoshiro256 {
 public:
  explicit Xoshiro256(uint64_t seed) {
    for (uint64_t& s : s_) s = splitmix64(seed);
  }
  uint64_t next() {
    const uint64_t result = s_[0] + s_[3];
    const uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = (s_[3] << 45) | (s_[3] >> 19);
    return result;
  }

 private:
  uint64_t s_[4];
};

uint64_t fnv1a(std::string_view text) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (char ch : text) h = (h ^ static_cast<unsigned char>(ch)) * 0x100000001b3ull;
  return h;
}

// The sum of four uniform 16-bit draws (Irwin-Hall) is close enough to a normal for weights
// that only need realistic magnitudes, and costs one generator step per value.
class RandomBf16 {
 public:
  RandomBf16(uint64_t seed, std::string_view tensor, double stddev)
      : rng_(seed * 0x9e3779b97f4a7c15ull ^ fnv1a(tensor)),
        scale_(static_cast<float>(stddev / std::sqrt((65536.0 * 65536.0 - 1) / 3))) {}
  uint16_t next() {
    const uint64_t r = rng_.next();
    const int64_t sum = int64_t(r & 0xffff) + int64_t((r >> 16) & 0xffff) + int64_t((r >> 32) & 0xffff) + int64_t(r >> 48);
    return float_to_bf16(static_cast<float>(sum - 131070) * scale_);  // 131070: the sum's mean
  }

 private:
  Xoshiro256 rng_;
  float scale_;
};

constexpr double kWeightStddev = 0.02;  // transformers' initializer_range
constexpr uint16_t kBf16One = 0x3f80;
constexpr size_t kChunkElements = size_t(1) << 20;

Status write_text_file(const std::filesystem::path& path, const std::string& text) {
  std::ofstream out(path);
  out << text;
  out.close();
  if (!out) return error("{}: cannot write: {}", path.string(), std::strerror(errno));
  return Status();
}

Status prepare_directory(const std::filesystem::path& dir, uint64_t total_bytes) {
  std::error_code ec;
  if (std::filesystem::exists(dir, ec)) {
    if (!std::filesystem::is_directory(dir, ec)) return error("{}: exists and is not a directory", dir.string());
    if (!std::filesystem::is_empty(dir, ec)) {
      return error("{}: not empty; make-model writes into a new or empty directory", dir.string());
    }
  } else if (!std::filesystem::create_directories(dir, ec)) {
    return error("{}: cannot create: {}", dir.string(), ec.message());
  }
  // Failing now beats failing with a disk full after an hour of writing.
  const std::filesystem::space_info space = std::filesystem::space(dir, ec);
  if (!ec && space.available < total_bytes) {
    return error("{}: the model needs {:.2f} GiB but only {:.2f} GiB are free", dir.string(),
                 total_bytes / double(1ull << 30), space.available / double(1ull << 30));
  }
  return Status();
}

// Greedy in checkpoint order, as transformers' save_pretrained shards.
std::vector<std::vector<TensorSpec>> plan_shards(const std::vector<TensorSpec>& specs, uint64_t max_shard_bytes) {
  std::vector<std::vector<TensorSpec>> shards;
  uint64_t shard_bytes = 0;
  for (const TensorSpec& t : specs) {
    if (shards.empty() || (shard_bytes > 0 && shard_bytes + t.size_bytes() > max_shard_bytes)) {
      shards.emplace_back();
      shard_bytes = 0;
    }
    shards.back().push_back(t);
    shard_bytes += t.size_bytes();
  }
  return shards;
}

}  // namespace

Expected<MakeModelResult> write_random_model(const ModelConfig& config, const std::filesystem::path& dir,
                                             const MakeModelOptions& options) {
  EVT_RETURN_IF_ERROR(validate_config(config, "the model config"));
  const std::vector<TensorSpec> specs = model_tensor_specs(config);
  MakeModelResult result;
  for (const TensorSpec& t : specs) {
    result.num_parameters += num_elements(t.shape);
    result.total_bytes += t.size_bytes();
  }
  EVT_RETURN_IF_ERROR(prepare_directory(dir, result.total_bytes));

  const std::vector<std::vector<TensorSpec>> shards = plan_shards(specs, options.max_shard_bytes);
  result.num_shards = static_cast<int>(shards.size());
  nlohmann::json weight_map = nlohmann::json::object();
  std::vector<uint16_t> chunk(kChunkElements);
  uint64_t done_bytes = 0;
  for (size_t s = 0; s < shards.size(); ++s) {
    const std::string shard_name = shards.size() == 1
                                       ? std::string(kSingleFileName)
                                       : fmt::format("model-{:05d}-of-{:05d}.safetensors", s + 1, shards.size());
    // transformers refuses safetensors files whose metadata does not say format "pt".
    EVT_ASSIGN_OR_RETURN(SafetensorsWriter writer, SafetensorsWriter::create(dir / shard_name, shards[s],
                                                                             {{"format", "pt"}}));
    for (const TensorSpec& t : shards[s]) {
      weight_map[t.name] = shard_name;
      RandomBf16 random(options.seed, t.name, kWeightStddev);
      const bool is_norm = t.shape.size() == 1;  // every 1-D tensor of these models is an RMSNorm weight
      for (size_t left = num_elements(t.shape); left > 0;) {
        const size_t n = std::min(left, kChunkElements);
        for (size_t i = 0; i < n; ++i) chunk[i] = is_norm ? kBf16One : random.next();
        EVT_RETURN_IF_ERROR(writer.write(std::as_bytes(std::span(chunk.data(), n))));
        left -= n;
        done_bytes += n * sizeof(uint16_t);
        if (options.progress) options.progress(done_bytes, result.total_bytes, t.name);
      }
    }
    EVT_RETURN_IF_ERROR(writer.finish());
  }
  if (shards.size() > 1) {
    const nlohmann::json index = {{"metadata", {{"total_size", result.total_bytes}}}, {"weight_map", weight_map}};
    EVT_RETURN_IF_ERROR(write_text_file(dir / kIndexFileName, index.dump(2) + "\n"));
  }
  EVT_RETURN_IF_ERROR(write_text_file(dir / "config.json", to_hf_config_json(config)));
  return result;
}

}  // namespace evt::model
