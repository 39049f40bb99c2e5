#include "kernels/llm_tile_check.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <sstream>
#include <stdexcept>

namespace evt::testing::llm {

namespace {

constexpr size_t kMaxMessages = 8;

// A bf16 bit pattern as an integer that orders like the value, so ulps are differences.
int64_t bf16_ordinal(uint16_t b) {
  return (b & 0x8000u) ? -static_cast<int64_t>(b & 0x7fffu) : static_cast<int64_t>(b);
}

template <typename T>
T load(const std::byte* p, int64_t i) {
  T v;
  std::memcpy(&v, p + i * static_cast<int64_t>(sizeof(T)), sizeof(T));
  return v;
}

bool is_poison(DType t, const std::byte* p, int64_t i) {
  switch (t) {
    case DType::kF32:
      return load<uint32_t>(p, i) == kPoisonF32;
    case DType::kBf16:
      return load<uint16_t>(p, i) == kPoisonBf16;
    case DType::kI32:
      return load<uint32_t>(p, i) == kPoisonI32;
    case DType::kI64:
      break;
  }
  throw std::logic_error("no i64 outputs");
}

class Reporter {
 public:
  explicit Reporter(OutputReport& r) : r_(r) {}
  void fail(const std::string& message) {
    ++r_.failures;
    if (r_.messages.size() < kMaxMessages) r_.messages.push_back(message);
  }

 private:
  OutputReport& r_;
};

std::string show(DType t, const std::byte* p, int64_t i) {
  std::ostringstream os;
  os.precision(9);
  switch (t) {
    case DType::kF32: {
      const uint32_t bits = load<uint32_t>(p, i);
      if (bits == kPoisonF32) return "poison";
      os << std::bit_cast<float>(bits);
      break;
    }
    case DType::kBf16: {
      const uint16_t bits = load<uint16_t>(p, i);
      if (bits == kPoisonBf16) return "poison";
      os << bf16_to_float(bits) << " (0x" << std::hex << bits << ")";
      break;
    }
    case DType::kI32: {
      const uint32_t bits = load<uint32_t>(p, i);
      if (bits == kPoisonI32) return "poison";
      os << static_cast<int32_t>(bits);
      break;
    }
    case DType::kI64:
      break;
  }
  return os.str();
}

// A value the contract allows: finite, or -inf where the output may hold it.
bool allowed(double v, bool neg_inf_ok) { return std::isfinite(v) || (neg_inf_ok && v == -INFINITY); }

// One written floating-point element (f32, or bf16 read as float).
void compare_float(const OutputSpec& spec, int64_t i, double got, double want, int64_t ulps, OutputReport& r,
                   Reporter& rep, const std::byte* g, const std::byte* w) {
  const HostTensor& t = spec.tensor;
  const Tolerance tol = tolerance(t.dtype);
  if (!allowed(want, spec.neg_inf_ok)) {
    rep.fail(t.element_name(i) + ": the reference left " + show(t.dtype, w, i));
    return;
  }
  if (!allowed(got, spec.neg_inf_ok)) {
    rep.fail(t.element_name(i) + ": got " + show(t.dtype, g, i) + ", want " + show(t.dtype, w, i));
    return;
  }
  if (std::isinf(want) || std::isinf(got)) {
    if (got != want) rep.fail(t.element_name(i) + ": got " + show(t.dtype, g, i) + ", want " + show(t.dtype, w, i));
    return;
  }
  const double err = std::fabs(got - want);
  r.max_abs_err = std::max(r.max_abs_err, err);
  if (t.dtype == DType::kBf16) {
    r.max_ulps = std::max(r.max_ulps, ulps);
    // Or within the f32 bound before one rounding each: a value a sum of many products (the
    // residual stream's, down's 12,288) rounds an f32 error up to that bound to the nearest bf16.
    const double ulp = std::ldexp(1.0, std::ilogb(std::fabs(want)) - 7);
    if (ulps > tol.ulps && err > tol.abs + tol.rel * std::fabs(want) + ulp) {
      rep.fail(t.element_name(i) + ": got " + show(t.dtype, g, i) + ", want " + show(t.dtype, w, i) + ", " +
               std::to_string(ulps) + " ulps apart");
    }
    return;
  }
  const double ratio = err / (tol.abs + tol.rel * std::fabs(want));
  r.max_tol_ratio = std::max(r.max_tol_ratio, ratio);
  if (ratio > 1) {
    std::ostringstream os;
    os << t.element_name(i) << ": got " << show(t.dtype, g, i) << ", want " << show(t.dtype, w, i) << ", |diff| "
       << err;
    rep.fail(os.str());
  }
}

OutputReport compare_one(const OutputSpec& spec, const GuardedImage& got, const GuardedImage& want) {
  const HostTensor& t = spec.tensor;
  OutputReport r;
  r.buffer = t.name;
  r.dtype = t.dtype;
  r.scratch = spec.scratch;
  r.untouched = spec.untouched;
  Reporter rep(r);
  if (!got.guards_intact()) rep.fail(t.name + ": the run wrote outside the buffer (a guard band changed)");
  if (!want.guards_intact()) rep.fail(t.name + ": the reference wrote outside the buffer (a guard band changed)");
  if (spec.scratch) return r;
  const std::byte* g = got.payload();
  const std::byte* w = want.payload();
  for (int64_t i = 0; i < t.numel(); ++i) {
    if (!spec.written(i)) {
      // Outside the contract: both runs must have left the poison alone.
      if (!is_poison(t.dtype, g, i))
        rep.fail(t.element_name(i) + " must stay untouched, but the run wrote " + show(t.dtype, g, i));
      if (!is_poison(t.dtype, w, i))
        rep.fail(t.element_name(i) + " must stay untouched, but the reference wrote " + show(t.dtype, w, i));
      continue;
    }
    ++r.written;
    switch (t.dtype) {
      case DType::kF32:
        compare_float(spec, i, load<float>(g, i), load<float>(w, i), 0, r, rep, g, w);
        break;
      case DType::kBf16: {
        const uint16_t gb = load<uint16_t>(g, i), wb = load<uint16_t>(w, i);
        compare_float(spec, i, bf16_to_float(gb), bf16_to_float(wb), std::abs(bf16_ordinal(gb) - bf16_ordinal(wb)), r, rep, g,
                      w);
        break;
      }
      case DType::kI32:
        if (is_poison(t.dtype, w, i)) {
          rep.fail(t.element_name(i) + ": the reference left it unwritten");
        } else if (load<int32_t>(g, i) != load<int32_t>(w, i)) {
          rep.fail(t.element_name(i) + ": got " + show(t.dtype, g, i) + ", want " + show(t.dtype, w, i));
        }
        break;
      case DType::kI64:
        throw std::logic_error("no i64 outputs");
    }
  }
  return r;
}

}  // namespace

bool GuardedImage::guards_intact() const {
  auto intact = [](const std::byte* p) {
    return std::all_of(p, p + kGuardBytes, [](std::byte b) { return b == kGuardByte; });
  };
  return intact(bytes.data()) && intact(bytes.data() + bytes.size() - kGuardBytes);
}

std::vector<GuardedImage> poisoned_outputs(const Case& c) {
  std::vector<GuardedImage> images;
  for (const OutputSpec& o : c.writes) {
    GuardedImage img;
    img.bytes.assign(o.tensor.bytes.size() + 2 * kGuardBytes, kGuardByte);
    std::byte* p = img.payload();
    for (int64_t i = 0; i < o.tensor.numel(); ++i) {
      switch (o.tensor.dtype) {
        case DType::kF32:
          std::memcpy(p + 4 * i, &kPoisonF32, 4);
          break;
        case DType::kBf16:
          std::memcpy(p + 2 * i, &kPoisonBf16, 2);
          break;
        case DType::kI32:
          std::memcpy(p + 4 * i, &kPoisonI32, 4);
          break;
        case DType::kI64:
          throw std::logic_error("no i64 outputs");
      }
    }
    images.push_back(std::move(img));
  }
  return images;
}

// f32: the references sum in double and round once; the bodies accumulate in f32, in another
// order on the GPU (per lane, then a shuffle tree). Over every case the CPU bodies stay within
// 0.2 of this bound: the worst is gate_up_silu at H = 136 (|diff| 1.8e-4 on outputs near 10,
// silu(g) * u compounds two dot products' rounding), projections and attention reach 0.01-0.1,
// copies and norms 0.002. That leaves ~5x for the GPU's summation order and its expf/cosf, while
// the bugs these tests look for (a wrong index, tile bound, layer, or eps on the "smallx" cases)
// move outputs by 1e-2 or more. bf16 (the KV cache, attn, act, the residual stream): body and
// reference round f32 values that differ in their last bits, so round-to-nearest can land one ulp
// apart, and on the CPU it does; or values within the f32 tolerance and an ulp (near 0, silu(g) * u
// of a small g, that is several bf16 ulps).
Tolerance tolerance(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return Tolerance{1e-4, 1e-4, 0};
    case DType::kBf16:
      return Tolerance{1e-4, 1e-4, 1};
    case DType::kI32:
    case DType::kI64:
      return Tolerance{};
  }
  return Tolerance{};
}

std::string OutputReport::summary() const {
  std::ostringstream os;
  os.precision(3);
  if (scratch) return buffer + " (" + dtype_name(dtype) + " scratch): guard bands " + (ok() ? "intact" : "changed");
  os << buffer << " (" << dtype_name(dtype) << ", " << written << " written): ";
  switch (dtype) {
    case DType::kF32:
      os << "max |diff| " << max_abs_err << ", " << max_tol_ratio << " of the tolerance";
      break;
    case DType::kBf16:
      os << "max " << max_ulps << " ulp (|diff| " << max_abs_err << ")";
      break;
    default:
      os << (failures == 0 ? "exact" : "differs");
      break;
  }
  if (failures > 0) os << ", " << failures << " failures";
  return os.str();
}

std::vector<OutputReport> compare_outputs(const Case& c, const std::vector<GuardedImage>& got,
                                          const std::vector<GuardedImage>& want) {
  if (got.size() != c.writes.size() || want.size() != c.writes.size()) throw std::logic_error("compare_outputs: sizes");
  std::vector<OutputReport> reports;
  for (size_t k = 0; k < c.writes.size(); ++k) reports.push_back(compare_one(c.writes[k], got[k], want[k]));
  return reports;
}

bool all_ok(const std::vector<OutputReport>& reports) {
  return std::all_of(reports.begin(), reports.end(), [](const OutputReport& r) { return r.ok(); });
}

std::string describe_failures(const std::vector<OutputReport>& reports) {
  std::ostringstream os;
  for (const OutputReport& r : reports) {
    if (r.ok()) continue;
    os << r.summary() << "\n";
    for (const std::string& m : r.messages) os << "  " << m << "\n";
  }
  return os.str();
}

void run_on_cpu(const Case& c, kernels::CpuTileFn fn, std::vector<GuardedImage>& outputs, int64_t skip_tile) {
  using kernels::BufferView;
  std::vector<BufferView> reads, writes;
  for (const HostTensor& t : c.reads) {
    reads.push_back(BufferView{const_cast<std::byte*>(t.bytes.data()), t.shape, t.numel()});
  }
  for (size_t k = 0; k < c.writes.size(); ++k) {
    const HostTensor& t = c.writes[k].tensor;
    writes.push_back(BufferView{outputs[k].payload(), t.shape, t.numel()});
  }
  for (int64_t n = 0; n < c.tile_count(); ++n) {
    if (n == skip_tile) continue;
    const std::vector<int64_t> tile = c.tile(n);
    kernels::TileArgs args{tile, reads, writes, nullptr};
    fn(args);
  }
}

void perturb(HostTensor& t, int64_t element) {
  switch (t.dtype) {
    case DType::kF32:
      t.as<float>()[element] += 4;
      break;
    case DType::kBf16:
      t.as<uint16_t>()[element] = float_to_bf16(bf16_to_float(t.as<uint16_t>()[element]) + 4);
      break;
    case DType::kI32:
      t.as<int32_t>()[element] += 1;
      break;
    case DType::kI64:
      t.as<int64_t>()[element] += 1;
      break;
  }
}

}  // namespace evt::testing::llm
