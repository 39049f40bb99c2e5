#pragma once
// A Hugging Face checkpoint directory: model.safetensors, or shards listed by
// model.safetensors.index.json. Each shard is mapped once; tensors stay in place until used.

#include <filesystem>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "model/safetensors.h"
#include "util/status.h"

namespace evt::model {

inline constexpr const char* kSingleFileName = "model.safetensors";
inline constexpr const char* kIndexFileName = "model.safetensors.index.json";

class Checkpoint {
 public:
  // Prefers model.safetensors when both exist, as transformers does.
  static Expected<Checkpoint> open(const std::filesystem::path& dir);

  std::vector<std::string> names() const;  // sorted
  // The error names the file that lists the checkpoint's tensors.
  Expected<TensorRef> find(std::string_view name) const;
  size_t num_files() const { return files_.size(); }

 private:
  std::string listing_;  // model.safetensors or the index, for "missing tensor" messages
  std::vector<SafetensorsFile> files_;
  std::map<std::string, TensorRef, std::less<>> tensors_;
};

}  // namespace evt::model
