#pragma once
// Reading .safetensors files (https://github.com/huggingface/safetensors): an 8-byte
// little-endian header length, a JSON header {name: {dtype, shape, data_offsets}, __metadata__},
// then the tensor bytes. Files are memory-mapped and every offset is checked against the file
// before a TensorRef points into it.

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "model/mapped_file.h"
#include "util/status.h"

namespace evt::model {

// The dtypes Hugging Face checkpoints of these models come in; others are refused by name.
enum class DType { kBF16, kF16, kF32 };

std::string_view dtype_name(DType dtype);  // "BF16", as in the header
size_t dtype_size_bytes(DType dtype);
std::string shape_str(const std::vector<int64_t>& shape);  // "[151936, 1024]"
int64_t num_elements(const std::vector<int64_t>& shape);

// A tensor's name, dtype and shape, without data: what a writer is told up front.
struct TensorSpec {
  std::string name;
  DType dtype = DType::kBF16;
  std::vector<int64_t> shape;

  size_t size_bytes() const { return num_elements(shape) * dtype_size_bytes(dtype); }
};

struct TensorRef {
  std::string name;
  DType dtype = DType::kBF16;
  std::vector<int64_t> shape;
  const std::byte* data = nullptr;  // into the file's mapping; unaligned in general
  size_t size_bytes = 0;
  std::string file;  // the .safetensors path, for messages

  int64_t numel() const { return num_elements(shape); }
};

// Files larger than this header are not safetensors; the safetensors library sets the same cap.
inline constexpr uint64_t kMaxHeaderBytes = 100ull << 20;

class SafetensorsFile {
 public:
  static Expected<SafetensorsFile> open(const std::filesystem::path& path);

  const std::string& path() const { return mapping_.path(); }
  const std::map<std::string, TensorRef, std::less<>>& tensors() const { return tensors_; }
  const TensorRef* find(std::string_view name) const;
  const std::map<std::string, std::string>& metadata() const { return metadata_; }

 private:
  explicit SafetensorsFile(MappedFile mapping) : mapping_(std::move(mapping)) {}
  Status parse_header();

  MappedFile mapping_;
  std::map<std::string, TensorRef, std::less<>> tensors_;
  std::map<std::string, std::string> metadata_;
};

}  // namespace evt::model
