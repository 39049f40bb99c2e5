#include "model/tuning_table.h"

#include <fmt/format.h>

#include <fstream>
#include <limits>

#include <nlohmann/json.hpp>

#include "util/int_math.h"

namespace evt::model {

namespace {

// The entries' values along one axis nearest `want` from above (else the largest).
int64_t nearest_at_or_above(const std::vector<int64_t>& values, int64_t want) {
  int64_t above = std::numeric_limits<int64_t>::max(), largest = 0;
  for (int64_t v : values) {
    if (v >= want && v < above) above = v;
    if (v > largest) largest = v;
  }
  return above != std::numeric_limits<int64_t>::max() ? above : largest;
}

}  // namespace

const TunedTiling* TuningTable::find(int64_t tokens, int64_t context) const {
  if (entries.empty()) return nullptr;
  std::vector<int64_t> token_counts;
  for (const TunedTiling& e : entries) token_counts.push_back(e.tokens);
  const int64_t t = nearest_at_or_above(token_counts, tokens);
  std::vector<int64_t> contexts;
  for (const TunedTiling& e : entries) {
    if (e.tokens == t) contexts.push_back(e.context);
  }
  const int64_t c = nearest_at_or_above(contexts, context);
  for (const TunedTiling& e : entries) {
    if (e.tokens == t && e.context == c) return &e;
  }
  return nullptr;  // unreachable: (t, c) is an entry's
}

std::string model_shapes(const ModelConfig& c) {
  std::string s = fmt::format("layers {}, hidden {}, intermediate {}, heads {}/{}, head_dim {}, vocab {}", c.num_layers,
                              c.hidden_size, c.intermediate_size, c.num_heads, c.num_kv_heads, c.head_dim,
                              c.vocab_size);
  if (c.moe) {
    s += fmt::format(", experts {} top-{} of {}", c.moe->num_experts, c.moe->num_experts_per_tok,
                     c.moe->moe_intermediate_size);
  }
  return s;
}

Tiling tuned_tiling(const Tiling& base, const TuningTable* table, int64_t tokens, int64_t longest_context) {
  const TunedTiling* e = table != nullptr ? table->find(tokens, longest_context) : nullptr;
  if (e == nullptr) return base;
  Tiling t = base;
  t.qkv_splits = e->qkv_splits;
  t.kv_split_len = std::max<int64_t>(1, ceil_div(longest_context, e->kv_splits));
  return t;
}

Expected<TuningTable> load_tuning_table(const std::string& path) {
  std::ifstream in(path);
  if (!in) return error("{}: cannot open the tuning table", path);
  const nlohmann::json j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return error("{}: not a JSON object", path);
  TuningTable t;
  for (auto [key, field] : {std::pair{"shapes", &t.shapes}, {"device", &t.device}, {"exec", &t.exec}}) {
    if (!j.contains(key) || !j[key].is_string()) return error("{}: \"{}\" must be a string", path, key);
    *field = j[key].get<std::string>();
  }
  if (!j.contains("entries") || !j["entries"].is_array()) return error("{}: \"entries\" must be an array", path);
  for (size_t i = 0; i < j["entries"].size(); ++i) {
    const nlohmann::json& e = j["entries"][i];
    TunedTiling row;
    for (auto [key, field] : {std::pair{"tokens", &row.tokens},
                              {"context", &row.context},
                              {"qkv_splits", &row.qkv_splits},
                              {"kv_splits", &row.kv_splits}}) {
      if (!e.is_object() || !e.contains(key) || !e[key].is_number_integer() || e[key].get<int64_t>() < 1) {
        return error("{}: entry {}: \"{}\" must be an integer of at least 1", path, i, key);
      }
      *field = e[key].get<int64_t>();
    }
    row.ms = e.value("ms", 0.0);
    row.default_ms = e.value("default_ms", 0.0);
    for (const TunedTiling& other : t.entries) {
      if (other.tokens == row.tokens && other.context == row.context) {
        return error("{}: entry {}: a second entry for {} tokens at context {}", path, i, row.tokens, row.context);
      }
    }
    t.entries.push_back(row);
  }
  return t;
}

Status save_tuning_table(const std::string& path, const TuningTable& t) {
  nlohmann::json entries = nlohmann::json::array();
  for (const TunedTiling& e : t.entries) {
    entries.push_back({{"tokens", e.tokens},
                       {"context", e.context},
                       {"qkv_splits", e.qkv_splits},
                       {"kv_splits", e.kv_splits},
                       {"ms", e.ms},
                       {"default_ms", e.default_ms}});
  }
  const nlohmann::json j = {{"shapes", t.shapes}, {"device", t.device}, {"exec", t.exec}, {"entries", entries}};
  std::ofstream out(path);
  if (!out) return error("{}: cannot write the tuning table", path);
  out << j.dump(2) << "\n";
  if (!out) return error("{}: write failed", path);
  return Status();
}

}  // namespace evt::model
