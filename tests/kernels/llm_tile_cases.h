#pragma once
// Test cases for the LLM tile functions (src/kernels/llm/): for each registry row, a few odd
// shapes with seeded random inputs, laid out as the dense decode graph
// (src/model/graphs/dense_decode.evt.in) lays them out. A case lists the row's tile grid, its
// read and write buffers in the row's order, and the weights that `wtab` points at, so that the
// CPU test and the GPU test run the very same inputs: the GPU test uploads the weights and
// rebuilds wtab with their device addresses (set_weight_addresses).
//
// Plain C++ without gtest, so that it can judge a run without failing one: the must-fail tests
// expect the comparison to report a difference.

#include <cstddef>
#include <cstdint>
#include <iosfwd>
#include <span>
#include <string>
#include <vector>

#include "kernels/llm/decode_config.h"
#include "model/bf16.h"

namespace evt::testing::llm {

enum class DType { kF32, kBf16, kI32, kI64 };
int64_t dtype_bytes(DType t);
const char* dtype_name(DType t);

// A host array in row-major order.
struct HostTensor {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
  std::vector<std::byte> bytes;

  HostTensor() = default;
  HostTensor(std::string name, DType dtype, std::vector<int64_t> shape);
  int64_t numel() const;
  template <typename T>
  T* as() {
    return reinterpret_cast<T*>(bytes.data());
  }
  template <typename T>
  const T* as() const {
    return reinterpret_cast<const T*>(bytes.data());
  }
  // "k_cache[1, 37, 0, 5]" for a flat element index.
  std::string element_name(int64_t flat) const;
};

// An output buffer and what the row's contract says about it.
struct OutputSpec {
  HostTensor tensor;                // shape and dtype; the runs poison it first
  std::vector<uint8_t> must_write;  // per element; empty: every element must be written
  bool neg_inf_ok = false;          // ml: an empty KV split's max is -inf by contract
  bool scratch = false;             // the row may leave anything in it: only the guard bands are checked
  bool untouched = false;           // the row must write none of it in this case (must_write all 0)
  bool written(int64_t flat) const { return must_write.empty() || must_write[static_cast<size_t>(flat)] != 0; }
};

// wtab[layer][column] holds the address of weights[weight].
struct WeightSlot {
  int64_t layer;
  kernels::llm::WeightColumn column;
  int weight;
};

// An input element every run of the case depends on: the must-fail tests perturb it (for the
// body's run only) and expect the comparison to notice.
struct Probe {
  int read = -1;
  int64_t element = 0;
};

// The shape parameters of one case. Each row reads the fields it needs; `rows` is whichever
// tile size the row uses (cfg rows_h, rows_i or rows_v).
struct CaseSpec {
  std::string row;
  int64_t tokens = 1;  // T
  int64_t seqs = 1;    // S: sequences of the step (logit rows)
  int64_t layers = 3, layer = 1;
  int64_t hidden = 8, inter = 8, vocab = 97;
  int64_t heads = 4, kv_heads = 4, head_dim = 64;
  int64_t rows = 1;
  int64_t lm_rounds = 1;  // lm_head: rounds of `rows` rows per tile (cfg lm_rounds)
  int64_t qkv_split = 8, qkv_extra_splits = 0;  // K elements per QKV split; splits past ceil(H / split)
  int64_t page_size = 16, max_context = 8;      // KV pages; positions are < max_context
  int64_t kv_split = 32, kv_extra_splits = 0;   // positions per attention split; splits past the longest
  bool qk_norm = false;
  float q_scale = 1;  // decode attention: the range of q's partial sums, to make the softmax peaky
  bool appends = false;  // a decode step: attention finishes its heads, appends its own k and v (T = S)
  int64_t finish_pairs = 1;  // qkv_finish: (head, token) pairs per tile
  float x_scale = 1;  // the range of an RMSNorm's input: small, and eps weighs in the norm
  bool ties = false;  // sample: logits on a coarse grid, so that rows have tied maxima
  uint64_t seed = 1;
};

struct Case {
  CaseSpec spec;
  std::string name;           // the shape, for test names and messages
  std::vector<int64_t> grid;  // the group's tile grid, as the graph declares it
  int64_t layer = -1;         // layered groups: only the tiles with tile[0] == layer run
  std::vector<HostTensor> reads;
  std::vector<OutputSpec> writes;
  std::vector<HostTensor> weights;
  std::vector<WeightSlot> wtab_slots;
  int wtab_read = -1;  // which read is wtab; -1: the row reads no weights through it
  Probe probe;

  // The tiles the case runs: the box first[k] + [0, extent[k]) over the grid's rank.
  int rank() const { return static_cast<int>(grid.size()); }
  std::vector<int64_t> first() const;
  std::vector<int64_t> extent() const;
  int64_t tile_count() const;
  std::vector<int64_t> tile(int64_t linear) const;  // row-major within the box
};

// What the LM head leaves for sampling (lm_head.h's best): per row and tile of per_tile logits,
// the first largest (a NaN first) and its index.
std::vector<float> tile_bests(const float* logits, int64_t rows, int64_t vocab, int64_t per_tile);

// Writes `addresses[i]` (the address of weights[i] where the run reads it) into wtab.
void set_weight_addresses(Case& c, std::span<const void* const> addresses);
// wtab pointing at the case's own host weights. Cases hold raw addresses: call it again on
// every copy of a case before running it on the host.
void bind_host_weights(Case& c);

// The LLM rows the cases cover, in graph order.
const std::vector<std::string>& llm_rows();
// Every case of every row (cheap: shapes only); build_case makes its buffers.
const std::vector<CaseSpec>& llm_case_specs();
Case build_case(const CaseSpec& spec);
std::string case_name(const CaseSpec& spec);
std::ostream& operator<<(std::ostream& os, const CaseSpec& spec);  // "row name", for test output

// bf16 conversions come from the loader's model/bf16.h rather than warp_ops.h, so that the inputs
// do not depend on the code under test.
using model::bf16_to_float;
using model::float_to_bf16;

}  // namespace evt::testing::llm
