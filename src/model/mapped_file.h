#pragma once
// A whole file mapped read-only: checkpoint tensors are used in place, so loading a bf16 model
// copies nothing and pages come in from the page cache only when touched.

#include <cstddef>
#include <filesystem>
#include <span>
#include <string>

#include "util/status.h"

namespace evt::model {

class MappedFile {
 public:
  static Expected<MappedFile> open(const std::filesystem::path& path);

  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile();

  // Moving a MappedFile keeps the mapping where it is, so pointers into bytes() stay valid.
  std::span<const std::byte> bytes() const { return {data_, size_bytes_}; }
  const std::string& path() const { return path_; }

 private:
  MappedFile(std::string path, const std::byte* data, size_t size_bytes)
      : path_(std::move(path)), data_(data), size_bytes_(size_bytes) {}
  void unmap();

  std::string path_;
  const std::byte* data_ = nullptr;  // null for an empty file, which mmap cannot map
  size_t size_bytes_ = 0;
};

}  // namespace evt::model
