#pragma once
// Writing .safetensors files in a stream: the header (which fixes every offset) goes first,
// then tensor bytes in any chunking, so a model larger than memory can be written.

#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "model/safetensors.h"
#include "util/status.h"

namespace evt::model {

class SafetensorsWriter {
 public:
  static Expected<SafetensorsWriter> create(const std::filesystem::path& path, std::vector<TensorSpec> tensors,
                                            const std::map<std::string, std::string>& metadata = {});

  // The next bytes of the tensors, in the order create() got them; a chunk may span tensors.
  Status write(std::span<const std::byte> bytes);
  // Closes the file, which is complete only once every tensor byte was written.
  Status finish();

 private:
  struct Closer {
    void operator()(std::FILE* f) const { std::fclose(f); }
  };
  SafetensorsWriter(std::string path, std::FILE* file, uint64_t data_bytes)
      : path_(std::move(path)), file_(file), data_bytes_(data_bytes) {}
  Status write_raw(const void* data, size_t size);

  std::string path_;
  std::unique_ptr<std::FILE, Closer> file_;
  uint64_t data_bytes_ = 0;
  uint64_t written_bytes_ = 0;
};

}  // namespace evt::model
