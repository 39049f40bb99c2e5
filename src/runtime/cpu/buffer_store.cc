#include "runtime/cpu/buffer_store.h"

#include <fmt/format.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "util/check.h"

namespace evt::runtime::cpu {

namespace {

uint16_t float_to_16(float f, ir::DType t) {
  if (t == ir::DType::kBF16) {
    uint32_t bits;
    std::memcpy(&bits, &f, 4);
    return static_cast<uint16_t>((bits + 0x7fff + ((bits >> 16) & 1)) >> 16);  // round to nearest even
  }
  const _Float16 h = static_cast<_Float16>(f);
  uint16_t bits;
  std::memcpy(&bits, &h, 2);
  return bits;
}

std::string element_str(const ir::Buffer& b, const std::vector<int64_t>& shape, int64_t linear) {
  std::vector<int64_t> c(shape.size());
  for (size_t k = shape.size(); k-- > 0;) {
    c[k] = linear % shape[k];
    linear /= shape[k];
  }
  return fmt::format("{}{}", b.name, ir::coords_str(c));
}

}  // namespace

BufferStore::BufferStore(const ir::TileGraph& tg) : tg_(&tg) {
  const ir::Graph& g = tg.graph();
  written_.assign(g.buffers.size(), false);
  for (const ir::TaskGroup& group : g.groups) {
    for (const std::string& w : group.writes) {
      const int b = g.buffer_index(w);
      if (b >= 0) written_[b] = true;
    }
  }
  for (size_t b = 0; b < g.buffers.size(); ++b) {
    int64_t n = 1;
    for (int64_t d : tg.buffer_shapes()[b]) n *= d;
    numel_.push_back(n);
    const int64_t bytes = n * ir::dtype_bytes(g.buffers[b].dtype);
    storage_.emplace_back((bytes + 7) / 8, 0);
    data_.push_back(storage_.back().data());
  }
}

Status BufferStore::bind_external(int buffer, std::span<std::byte> memory) {
  const ir::Buffer& b = tg_->graph().buffers[buffer];
  const size_t want = static_cast<size_t>(numel_[buffer] * ir::dtype_bytes(b.dtype));
  if (memory.size() != want) {
    return error("buffer {}: external memory holds {} bytes, the binding needs {}", b.name, memory.size(), want);
  }
  storage_[buffer] = {};
  data_[buffer] = memory.data();
  return Status();
}

kernels::BufferView BufferStore::view(int buffer) const {
  return kernels::BufferView{data_[buffer], tg_->buffer_shapes()[buffer],
                             numel_[buffer]};
}

std::span<const std::byte> BufferStore::bytes(int buffer) const {
  return {static_cast<const std::byte*>(data_[buffer]),
          static_cast<size_t>(numel_[buffer] * ir::dtype_bytes(tg_->graph().buffers[buffer].dtype))};
}

std::span<std::byte> BufferStore::mutable_bytes(int buffer) {
  auto b = bytes(buffer);
  return {const_cast<std::byte*>(b.data()), b.size()};
}

void BufferStore::fill_inputs(uint64_t seed) {
  const ir::Graph& g = tg_->graph();
  for (size_t b = 0; b < g.buffers.size(); ++b) {
    if (written_[b]) continue;
    std::mt19937_64 rng(seed * 1000003 + b);
    std::uniform_real_distribution<float> real(-1.0f, 1.0f);
    std::uniform_int_distribution<int64_t> integer(0, 7);
    void* data = data_[b];
    for (int64_t i = 0; i < numel_[b]; ++i) {
      switch (g.buffers[b].dtype) {
        case ir::DType::kF32: static_cast<float*>(data)[i] = real(rng); break;
        case ir::DType::kBF16:
        case ir::DType::kF16: static_cast<uint16_t*>(data)[i] = float_to_16(real(rng), g.buffers[b].dtype); break;
        case ir::DType::kI32: static_cast<int32_t*>(data)[i] = static_cast<int32_t>(integer(rng)); break;
        case ir::DType::kI64: static_cast<int64_t*>(data)[i] = integer(rng); break;
      }
    }
  }
}

void BufferStore::poison_outputs() {
  const ir::Graph& g = tg_->graph();
  for (size_t b = 0; b < g.buffers.size(); ++b) {
    if (!written_[b]) continue;
    auto out = mutable_bytes(static_cast<int>(b));
    switch (g.buffers[b].dtype) {
      case ir::DType::kF32: {
        const float nan = std::numeric_limits<float>::quiet_NaN();
        for (int64_t i = 0; i < numel_[b]; ++i) std::memcpy(out.data() + 4 * i, &nan, 4);
        break;
      }
      case ir::DType::kBF16:
      case ir::DType::kF16: std::memset(out.data(), 0xff, out.size()); break;  // NaN in both formats
      case ir::DType::kI32:
      case ir::DType::kI64: std::memset(out.data(), 0x7f, out.size()); break;
    }
  }
}

Expected<int64_t> BufferStore::load_index(const std::string& buffer, std::span<const int64_t> index) const {
  const ir::Graph& g = tg_->graph();
  const int b = g.buffer_index(buffer);
  if (b < 0) return error("unknown index buffer '{}'", buffer);
  const auto& shape = tg_->buffer_shapes()[b];
  if (index.size() != shape.size()) {
    return error("index buffer {} has rank {} but is indexed with {} subscripts", buffer, shape.size(), index.size());
  }
  int64_t linear = 0;
  for (size_t k = 0; k < shape.size(); ++k) {
    if (index[k] < 0 || index[k] >= shape[k]) {
      return error("index buffer {}{} is out of bounds (shape {})", buffer,
                   ir::coords_str({index.begin(), index.end()}), ir::coords_str(shape));
    }
    linear = linear * shape[k] + index[k];
  }
  switch (g.buffers[b].dtype) {
    case ir::DType::kI32: return static_cast<const int32_t*>(static_cast<const void*>(data_[b]))[linear];
    case ir::DType::kI64: return static_cast<const int64_t*>(static_cast<const void*>(data_[b]))[linear];
    default: return error("index buffer {} has dtype {}; index buffers must be i32 or i64", buffer,
                          ir::dtype_name(g.buffers[b].dtype));
  }
}

Status BufferStore::compare_outputs(const BufferStore& expected) const {
  const ir::Graph& g = tg_->graph();
  for (size_t b = 0; b < g.buffers.size(); ++b) {
    if (!written_[b]) continue;
    auto got = bytes(static_cast<int>(b));
    auto want = expected.bytes(static_cast<int>(b));
    EVT_CHECK(got.size() == want.size()) << "stores of different bindings compared";
    if (std::memcmp(got.data(), want.data(), got.size()) == 0) continue;
    const int width = ir::dtype_bytes(g.buffers[b].dtype);
    int64_t i = 0;
    while (std::memcmp(got.data() + i * width, want.data() + i * width, width) == 0) ++i;
    auto value = [&](std::span<const std::byte> s) -> std::string {
      const std::byte* p = s.data() + i * width;
      switch (g.buffers[b].dtype) {
        case ir::DType::kF32: { float f; std::memcpy(&f, p, 4); return fmt::format("{}", f); }
        case ir::DType::kI32: { int32_t v; std::memcpy(&v, p, 4); return fmt::format("{}", v); }
        case ir::DType::kI64: { int64_t v; std::memcpy(&v, p, 8); return fmt::format("{}", v); }
        default: { uint16_t v; std::memcpy(&v, p, 2); return fmt::format("0x{:04x}", v); }
      }
    };
    return error("buffer {} differs from the serial run at {}: {} instead of {}", g.buffers[b].name,
                 element_str(g.buffers[b], tg_->buffer_shapes()[b], i), value(got), value(want));
  }
  return Status();
}

}  // namespace evt::runtime::cpu
