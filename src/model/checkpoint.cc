#include "model/checkpoint.h"

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

namespace evt::model {

using nlohmann::json;

namespace {

Expected<json> read_json_file(const std::filesystem::path& path) {
  std::ifstream in(path);
  if (!in) return error("{}: cannot open", path.string());
  std::stringstream text;
  text << in.rdbuf();
  try {
    return json::parse(text.str());
  } catch (const json::parse_error& e) {
    return error("{}: not valid JSON: {}", path.string(), e.what());
  }
}

}  // namespace

Expected<Checkpoint> Checkpoint::open(const std::filesystem::path& dir) {
  Checkpoint c;
  const std::filesystem::path single = dir / kSingleFileName;
  if (std::filesystem::exists(single)) {
    c.listing_ = single.string();
    EVT_ASSIGN_OR_RETURN(SafetensorsFile file, SafetensorsFile::open(single));
    c.tensors_ = file.tensors();
    c.files_.push_back(std::move(file));
    return c;
  }
  const std::filesystem::path index_path = dir / kIndexFileName;
  if (!std::filesystem::exists(index_path)) {
    return error("{}: neither {} nor {} is there", dir.string(), kSingleFileName, kIndexFileName);
  }
  c.listing_ = index_path.string();
  EVT_ASSIGN_OR_RETURN(const json index, read_json_file(index_path));
  if (!index.is_object() || !index.contains("weight_map") || !index["weight_map"].is_object()) {
    return error("{}: expected an object with a \"weight_map\" object", c.listing_);
  }
  std::map<std::string, size_t> file_index;  // shard name -> files_ entry: each shard mapped once
  for (const auto& [name, shard] : index["weight_map"].items()) {
    const std::string shard_name = shard.is_string() ? shard.get<std::string>() : "";
    // Shards sit beside the index; a path elsewhere is a broken (or hostile) index.
    if (shard_name.empty() || shard_name.find('/') != std::string::npos || shard_name == "..") {
      return error("{}: weight_map entry for {} must be a file name in the same directory, got {}", c.listing_, name,
                   shard.dump());
    }
    auto [it, inserted] = file_index.emplace(shard_name, c.files_.size());
    if (inserted) {
      EVT_ASSIGN_OR_RETURN(SafetensorsFile file, SafetensorsFile::open(dir / shard_name));
      c.files_.push_back(std::move(file));
    }
    const SafetensorsFile& file = c.files_[it->second];
    const TensorRef* t = file.find(name);
    if (t == nullptr) return error("{}: missing tensor {} ({} says it is there)", file.path(), name, kIndexFileName);
    c.tensors_.emplace(name, *t);
  }
  return c;
}

std::vector<std::string> Checkpoint::names() const {
  std::vector<std::string> out;
  out.reserve(tensors_.size());
  for (const auto& [name, t] : tensors_) out.push_back(name);
  return out;
}

Expected<TensorRef> Checkpoint::find(std::string_view name) const {
  const auto it = tensors_.find(name);
  if (it == tensors_.end()) return error("{}: missing tensor {}", listing_, name);
  return it->second;
}

}  // namespace evt::model
