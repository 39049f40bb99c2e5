#include "model/decode_weights.h"

#include <fmt/format.h>

namespace evt::model {

std::vector<DecodeWeight> decode_weights(const ModelConfig& c, const ModelWeights* host) {
  namespace llm = kernels::llm;
  const int64_t hidden = c.hidden_size, inter = c.intermediate_size;
  std::vector<DecodeWeight> list;
  auto global = [&](std::string what, GlobalWeight g, const Bf16Tensor* t, int64_t numel, int64_t fan_in) {
    list.push_back({.what = std::move(what), .global = g, .numel = numel, .fan_in = fan_in, .host = t});
  };
  global("embed_tokens", GlobalWeight::kEmbed, host ? &host->embed_tokens : nullptr, c.vocab_size * hidden, -1);
  for (int64_t l = 0; l < c.num_layers; ++l) {
    const LayerWeights* lw = host ? &host->layers[l] : nullptr;
    auto add = [&](const char* name, llm::WeightColumn column, const Bf16Tensor* t, int64_t numel, int64_t fan_in) {
      list.push_back({.what = fmt::format("layer {} {}", l, name), .layer = l, .column = column, .numel = numel,
                      .fan_in = fan_in, .host = lw ? t : nullptr});
    };
    add("q_proj", llm::kWq, lw ? &lw->q_proj : nullptr, c.q_size() * hidden, hidden);
    add("k_proj", llm::kWk, lw ? &lw->k_proj : nullptr, c.kv_size() * hidden, hidden);
    add("v_proj", llm::kWv, lw ? &lw->v_proj : nullptr, c.kv_size() * hidden, hidden);
    add("o_proj", llm::kWo, lw ? &lw->o_proj : nullptr, hidden * c.q_size(), c.q_size());
    add("gate_proj", llm::kWgate, lw ? &lw->gate_proj : nullptr, inter * hidden, hidden);
    add("up_proj", llm::kWup, lw ? &lw->up_proj : nullptr, inter * hidden, hidden);
    add("down_proj", llm::kWdown, lw ? &lw->down_proj : nullptr, hidden * inter, inter);
    add("input_layernorm", llm::kWinputNorm, lw ? &lw->input_layernorm : nullptr, hidden, 0);
    add("post_attention_layernorm", llm::kWpostNorm, lw ? &lw->post_attention_layernorm : nullptr, hidden, 0);
    if (c.qk_norm) {
      add("q_norm", llm::kWqNorm, lw ? &*lw->q_norm : nullptr, c.head_dim, 0);
      add("k_norm", llm::kWkNorm, lw ? &*lw->k_norm : nullptr, c.head_dim, 0);
    }
  }
  global("norm", GlobalWeight::kFinalNorm, host ? &host->norm : nullptr, hidden, 0);
  if (!c.tie_word_embeddings) {
    global("lm_head", GlobalWeight::kLmHead, host ? &host->lm_head : nullptr, c.vocab_size * hidden, hidden);
  }
  return list;
}

}  // namespace evt::model
