#include "model/decode_weights.h"

#include <fmt/format.h>

#include <cstring>
#include <span>

#include "kernels/llm/weight_tiles.h"

namespace evt::model {

namespace llm = kernels::llm;

int64_t DecodeWeight::stored_one() const {
  return layout == WeightLayout::kPlain ? rows * cols : llm::tiled_shape(rows, cols).bytes() / 2;
}

namespace {

// One matrix of `w`'s layout from its parts.
void pack_one(const DecodeWeight& w, std::span<const Bf16Tensor* const> parts, uint16_t* out) {
  const int64_t rows = w.rows, cols = w.cols;
  if (w.layout == WeightLayout::kPlain) {
    std::memcpy(out, parts[0]->values.data(), static_cast<size_t>(rows * cols * 2));
    return;
  }
  if (w.layout == WeightLayout::kTiledGateUp) {
    const int64_t inter = rows / 2;
    llm::pack_tiled(rows, cols, w.panel_rows, [&](int64_t n) -> const uint16_t* {
      bool up = false;
      const int64_t r = llm::gate_up_source_row(n, up);
      return r < inter ? parts[up ? 1 : 0]->values.data() + r * cols : nullptr;
    }, out);
    return;
  }
  llm::pack_tiled(rows, cols, w.panel_rows, [&](int64_t n) -> const uint16_t* {
    for (const Bf16Tensor* t : parts) {
      const int64_t t_rows = t->numel() / cols;
      if (n < t_rows) return t->values.data() + n * cols;
      n -= t_rows;
    }
    return nullptr;
  }, out);
}

}  // namespace

void DecodeWeight::pack(uint16_t* out) const {
  const size_t parts = host.size() / static_cast<size_t>(count);
  for (int64_t m = 0; m < count; ++m) {
    pack_one(*this, std::span(host).subspan(static_cast<size_t>(m) * parts, parts), out + m * stored_one());
  }
}

Expected<std::vector<DecodeWeight>> decode_weights(const ModelConfig& c, const ModelWeights* host,
                                                   const Tiling& tiling) {
  const int64_t hidden = c.hidden_size, inter = c.intermediate_size;
  std::vector<DecodeWeight> list;
  // A weight made of `parts`, each with the rows it contributes (all of them `cols` wide).
  auto add = [&](DecodeWeight w, std::vector<std::pair<const Bf16Tensor*, int64_t>> parts) -> Status {
    for (const auto& [t, rows] : parts) {
      if (t == nullptr) continue;
      if (t->numel() != rows * w.cols) {
        return error("{} ({}): {} values, the config needs {} x {}", t->name, t->file, t->numel(), rows, w.cols);
      }
      w.host.push_back(t);
    }
    if (!w.host.empty() && w.host.size() != parts.size()) return error("{}: some of its tensors are missing", w.what);
    list.push_back(std::move(w));
    return Status();
  };
  // A projection is stored in row panels of its tiles' panel_rows rows (weight_tiles.h).
  auto global = [](std::string what, GlobalWeight g, WeightLayout layout, int64_t rows, int64_t cols, int64_t fan_in,
                   int64_t panel_rows = 0) {
    return DecodeWeight{.what = std::move(what), .global = g, .layout = layout, .rows = rows, .cols = cols,
                        .fan_in = fan_in, .panel_rows = panel_rows};
  };
  EVT_RETURN_IF_ERROR(add(global("embed_tokens", GlobalWeight::kEmbed, WeightLayout::kPlain, c.vocab_size, hidden, -1),
                          {{host ? &host->embed_tokens : nullptr, c.vocab_size}}));
  for (int64_t l = 0; l < c.num_layers; ++l) {
    const LayerWeights* lw = host ? &host->layers[l] : nullptr;
    auto layer = [&](const char* name, llm::WeightColumn column, WeightLayout layout, int64_t rows, int64_t cols,
                     int64_t fan_in, int64_t panel_rows = 0) {
      return DecodeWeight{.what = fmt::format("layer {} {}", l, name), .layer = l, .column = column, .layout = layout,
                          .rows = rows, .cols = cols, .fan_in = fan_in, .panel_rows = panel_rows};
    };
    auto t = [&](const Bf16Tensor LayerWeights::*m) { return lw ? &(lw->*m) : nullptr; };
    const int64_t q = c.q_size(), kv = c.kv_size();
    EVT_RETURN_IF_ERROR(add(layer("qkv_proj", llm::kWqkv, WeightLayout::kTiled, q + 2 * kv, hidden, hidden,
                                  c.head_dim),
                            {{t(&LayerWeights::q_proj), q}, {t(&LayerWeights::k_proj), kv}, {t(&LayerWeights::v_proj), kv}}));
    EVT_RETURN_IF_ERROR(add(layer("o_proj", llm::kWo, WeightLayout::kTiled, hidden, q, q, tiling.rows_h),
                            {{t(&LayerWeights::o_proj), hidden}}));
    if (!c.is_moe_layer(l)) {
      EVT_RETURN_IF_ERROR(add(layer("gate_up_proj", llm::kWgateUp, WeightLayout::kTiledGateUp, 2 * inter, hidden,
                                    hidden, 2 * tiling.rows_i),
                              {{t(&LayerWeights::gate_proj), inter}, {t(&LayerWeights::up_proj), inter}}));
      EVT_RETURN_IF_ERROR(add(layer("down_proj", llm::kWdown, WeightLayout::kTiled, hidden, inter, inter,
                                    tiling.rows_h),
                              {{t(&LayerWeights::down_proj), hidden}}));
    } else {
      const int64_t experts = c.moe->num_experts, expert_inter = c.moe->moe_intermediate_size;
      EVT_RETURN_IF_ERROR(add(layer("router", llm::kWrouter, WeightLayout::kTiled, experts, hidden, hidden,
                                    tiling.rows_e),
                              {{lw ? &*lw->router : nullptr, experts}}));
      std::vector<std::pair<const Bf16Tensor*, int64_t>> gate_up, down;
      for (int64_t e = 0; e < experts; ++e) {
        const ExpertWeights* ew = lw ? &lw->experts[static_cast<size_t>(e)] : nullptr;
        gate_up.emplace_back(ew ? &ew->gate_proj : nullptr, expert_inter);
        gate_up.emplace_back(ew ? &ew->up_proj : nullptr, expert_inter);
        down.emplace_back(ew ? &ew->down_proj : nullptr, hidden);
      }
      DecodeWeight experts_gate_up = layer("experts_gate_up", llm::kWexpertsGateUp, WeightLayout::kTiledGateUp,
                                           2 * expert_inter, hidden, hidden);
      experts_gate_up.count = experts;
      EVT_RETURN_IF_ERROR(add(std::move(experts_gate_up), std::move(gate_up)));
      DecodeWeight experts_down =
          layer("experts_down", llm::kWexpertsDown, WeightLayout::kTiled, hidden, expert_inter, expert_inter);
      experts_down.count = experts;
      EVT_RETURN_IF_ERROR(add(std::move(experts_down), std::move(down)));
    }
    EVT_RETURN_IF_ERROR(add(layer("input_layernorm", llm::kWinputNorm, WeightLayout::kPlain, 1, hidden, 0),
                            {{t(&LayerWeights::input_layernorm), 1}}));
    EVT_RETURN_IF_ERROR(add(layer("post_attention_layernorm", llm::kWpostNorm, WeightLayout::kPlain, 1, hidden, 0),
                            {{t(&LayerWeights::post_attention_layernorm), 1}}));
    if (c.qk_norm) {
      EVT_RETURN_IF_ERROR(add(layer("q_norm", llm::kWqNorm, WeightLayout::kPlain, 1, c.head_dim, 0),
                              {{lw ? &*lw->q_norm : nullptr, 1}}));
      EVT_RETURN_IF_ERROR(add(layer("k_norm", llm::kWkNorm, WeightLayout::kPlain, 1, c.head_dim, 0),
                              {{lw ? &*lw->k_norm : nullptr, 1}}));
    }
  }
  EVT_RETURN_IF_ERROR(add(global("norm", GlobalWeight::kFinalNorm, WeightLayout::kPlain, 1, hidden, 0),
                          {{host ? &host->norm : nullptr, 1}}));
  // Tied: the LM head is the embedding, stored a second time in the projections' layout.
  const Bf16Tensor* lm = host ? (c.tie_word_embeddings ? &host->embed_tokens : &host->lm_head) : nullptr;
  EVT_RETURN_IF_ERROR(add(global("lm_head", GlobalWeight::kLmHead, WeightLayout::kTiled, c.vocab_size, hidden, hidden,
                                 tiling.rows_v),
                          {{lm, c.vocab_size}}));
  return list;
}

}  // namespace evt::model
