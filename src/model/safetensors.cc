#include "model/safetensors.h"

#include <fmt/ranges.h>

#include <algorithm>
#include <cstring>
#include <nlohmann/json.hpp>

namespace evt::model {

using nlohmann::json;

namespace {

constexpr DType kDTypes[] = {DType::kBF16, DType::kF16, DType::kF32};

Expected<DType> parse_dtype(const std::string& name, const std::string& where) {
  for (DType d : kDTypes) {
    if (name == dtype_name(d)) return d;
  }
  return error("{}: dtype {} is not supported (supported: BF16, F16, F32)", where, name);
}

// A JSON value that must be a list of non-negative integers, e.g. a shape.
Expected<std::vector<int64_t>> read_index_list(const json& entry, const char* key, const std::string& where) {
  const auto it = entry.find(key);
  if (it == entry.end()) return error("{}: no {}", where, key);
  const Status wrong = error("{}: {} must be a list of non-negative integers, got {}", where, key, it->dump());
  if (!it->is_array()) return wrong;
  std::vector<int64_t> out;
  for (const json& v : *it) {
    if (!v.is_number_unsigned()) return wrong;  // nlohmann types non-negative integers as unsigned
    out.push_back(v.get<int64_t>());
  }
  return out;
}

}  // namespace

std::string_view dtype_name(DType dtype) {
  switch (dtype) {
    case DType::kBF16: return "BF16";
    case DType::kF16: return "F16";
    case DType::kF32: return "F32";
  }
  return "?";
}

size_t dtype_size_bytes(DType dtype) { return dtype == DType::kF32 ? 4 : 2; }

std::string shape_str(const std::vector<int64_t>& shape) { return fmt::format("[{}]", fmt::join(shape, ", ")); }

int64_t num_elements(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

const TensorRef* SafetensorsFile::find(std::string_view name) const {
  const auto it = tensors_.find(name);
  return it == tensors_.end() ? nullptr : &it->second;
}

Expected<SafetensorsFile> SafetensorsFile::open(const std::filesystem::path& path) {
  EVT_ASSIGN_OR_RETURN(MappedFile mapping, MappedFile::open(path));
  SafetensorsFile file(std::move(mapping));
  EVT_RETURN_IF_ERROR(file.parse_header());
  return file;
}

Status SafetensorsFile::parse_header() {
  const std::string& file = path();
  const std::span<const std::byte> bytes = mapping_.bytes();
  if (bytes.size() < 8) return error("{}: {} bytes is too small for a safetensors file", file, bytes.size());
  uint64_t header_bytes = 0;
  for (int i = 7; i >= 0; --i) header_bytes = (header_bytes << 8) | std::to_integer<uint64_t>(bytes[i]);
  if (header_bytes > kMaxHeaderBytes) {
    return error("{}: header length {} is absurd (over {} MiB); not a safetensors file?", file, header_bytes,
                 kMaxHeaderBytes >> 20);
  }
  if (header_bytes > bytes.size() - 8) {
    return error("{}: header length {} runs past the end of the {}-byte file (truncated?)", file, header_bytes,
                 bytes.size());
  }
  const char* header_text = reinterpret_cast<const char*>(bytes.data() + 8);
  json header;
  try {
    header = json::parse(header_text, header_text + header_bytes);
  } catch (const json::parse_error& e) {
    return error("{}: the header is not valid JSON: {}", file, e.what());
  }
  if (!header.is_object()) return error("{}: the header is not a JSON object", file);

  const std::byte* data = bytes.data() + 8 + header_bytes;
  const uint64_t data_bytes = bytes.size() - 8 - header_bytes;
  for (const auto& [name, entry] : header.items()) {
    if (name == "__metadata__") {
      const Status wrong = error("{}: __metadata__ must map strings to strings", file);
      if (!entry.is_object()) return wrong;
      for (const auto& [key, value] : entry.items()) {
        if (!value.is_string()) return wrong;
        metadata_[key] = value.get<std::string>();
      }
      continue;
    }
    const std::string where = fmt::format("{}: tensor {}", file, name);
    if (!entry.is_object() || !entry.contains("dtype") || !entry["dtype"].is_string()) {
      return error("{}: expected {{\"dtype\": ..., \"shape\": ..., \"data_offsets\": ...}}", where);
    }
    TensorRef t{.name = name, .file = file};
    EVT_ASSIGN_OR_RETURN(t.dtype, parse_dtype(entry["dtype"].get<std::string>(), where));
    EVT_ASSIGN_OR_RETURN(t.shape, read_index_list(entry, "shape", where));
    EVT_ASSIGN_OR_RETURN(const std::vector<int64_t> offsets, read_index_list(entry, "data_offsets", where));
    if (offsets.size() != 2 || offsets[0] > offsets[1]) {
      return error("{}: data_offsets must be [begin, end] with begin <= end, got {}", where, shape_str(offsets));
    }
    // Sizes beyond the file are rejected below, so cap each dim first to keep the product exact.
    uint64_t needed_bytes = dtype_size_bytes(t.dtype);
    for (int64_t d : t.shape) {
      if (__builtin_mul_overflow(needed_bytes, static_cast<uint64_t>(d), &needed_bytes)) needed_bytes = UINT64_MAX;
    }
    const uint64_t begin = offsets[0], end = offsets[1];
    if (end - begin != needed_bytes) {
      return error("{}: data_offsets [{}, {}) hold {} bytes, but {} {} needs {}", where, begin, end, end - begin,
                   dtype_name(t.dtype), shape_str(t.shape), needed_bytes);
    }
    if (end > data_bytes) {
      return error("{}: needs bytes [{}, {}) of the data, but the file holds only {} (truncated?)", where, begin, end,
                   data_bytes);
    }
    t.data = data + begin;
    t.size_bytes = end - begin;
    tensors_.emplace(name, std::move(t));
  }

  // Tensors must not share bytes: each is read, and may be converted, on its own.
  std::vector<const TensorRef*> by_offset;
  for (const auto& [name, t] : tensors_) {
    if (t.size_bytes > 0) by_offset.push_back(&t);
  }
  std::sort(by_offset.begin(), by_offset.end(), [](const TensorRef* a, const TensorRef* b) { return a->data < b->data; });
  for (size_t i = 1; i < by_offset.size(); ++i) {
    const TensorRef& prev = *by_offset[i - 1];
    if (by_offset[i]->data < prev.data + prev.size_bytes) {
      return error("{}: tensors {} and {} overlap", file, prev.name, by_offset[i]->name);
    }
  }
  return Status();
}

}  // namespace evt::model
