#include "model/safetensors_writer.h"

#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>

#include "util/check.h"

namespace evt::model {

Expected<SafetensorsWriter> SafetensorsWriter::create(const std::filesystem::path& path,
                                                      std::vector<TensorSpec> tensors,
                                                      const std::map<std::string, std::string>& metadata) {
  nlohmann::json header = nlohmann::json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  uint64_t offset = 0;
  for (const TensorSpec& t : tensors) {
    EVT_CHECK(!header.contains(t.name)) << "tensor " << t.name << " written twice";
    const uint64_t end = offset + t.size_bytes();
    header[t.name] = {{"dtype", std::string(dtype_name(t.dtype))}, {"shape", t.shape}, {"data_offsets", {offset, end}}};
    offset = end;
  }
  std::string text = header.dump();
  // Padding the header to 8 bytes keeps every tensor as aligned as its offset, like the
  // safetensors library does.
  text.append((8 - text.size() % 8) % 8, ' ');

  const std::string name = path.string();
  std::FILE* file = std::fopen(name.c_str(), "wb");
  if (file == nullptr) return error("{}: cannot create: {}", name, std::strerror(errno));
  SafetensorsWriter writer(name, file, offset);
  std::byte length[8];
  for (int i = 0; i < 8; ++i) length[i] = std::byte((text.size() >> (8 * i)) & 0xff);
  EVT_RETURN_IF_ERROR(writer.write_raw(length, sizeof length));
  EVT_RETURN_IF_ERROR(writer.write_raw(text.data(), text.size()));
  return writer;
}

Status SafetensorsWriter::write(std::span<const std::byte> bytes) {
  EVT_CHECK(written_bytes_ + bytes.size() <= data_bytes_)
      << path_ << ": " << bytes.size() << " bytes more than the tensors hold";
  written_bytes_ += bytes.size();
  return write_raw(bytes.data(), bytes.size());
}

Status SafetensorsWriter::write_raw(const void* data, size_t size) {
  if (std::fwrite(data, 1, size, file_.get()) != size) return error("{}: cannot write: {}", path_, std::strerror(errno));
  return Status();
}

Status SafetensorsWriter::finish() {
  EVT_CHECK(written_bytes_ == data_bytes_) << path_ << ": finished after " << written_bytes_ << " of " << data_bytes_
                                          << " bytes";
  std::FILE* file = file_.release();
  if (std::fclose(file) != 0) return error("{}: cannot write: {}", path_, std::strerror(errno));
  return Status();
}

}  // namespace evt::model
