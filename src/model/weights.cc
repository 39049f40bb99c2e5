#include "model/weights.h"

#include <cstring>

#include "model/bf16.h"

namespace evt::model {

namespace {

// The one place that knows Hugging Face's tensor names and the shapes the config implies:
// calls fn(name, shape, slot) for each tensor of the model, in checkpoint order.
template <typename Fn>
void for_each_tensor(const ModelConfig& c, ModelWeights& w, Fn&& fn) {
  const int64_t hidden = c.hidden_size;
  fn("model.embed_tokens.weight", std::vector<int64_t>{c.vocab_size, hidden}, w.embed_tokens);
  w.layers.resize(c.num_layers);
  for (int64_t i = 0; i < c.num_layers; ++i) {
    LayerWeights& l = w.layers[i];
    const std::string p = "model.layers." + std::to_string(i) + ".";
    fn(p + "input_layernorm.weight", std::vector<int64_t>{hidden}, l.input_layernorm);
    fn(p + "self_attn.q_proj.weight", std::vector<int64_t>{c.q_size(), hidden}, l.q_proj);
    fn(p + "self_attn.k_proj.weight", std::vector<int64_t>{c.kv_size(), hidden}, l.k_proj);
    fn(p + "self_attn.v_proj.weight", std::vector<int64_t>{c.kv_size(), hidden}, l.v_proj);
    fn(p + "self_attn.o_proj.weight", std::vector<int64_t>{hidden, c.q_size()}, l.o_proj);
    if (c.qk_norm) {
      fn(p + "self_attn.q_norm.weight", std::vector<int64_t>{c.head_dim}, l.q_norm.emplace());
      fn(p + "self_attn.k_norm.weight", std::vector<int64_t>{c.head_dim}, l.k_norm.emplace());
    }
    fn(p + "post_attention_layernorm.weight", std::vector<int64_t>{hidden}, l.post_attention_layernorm);
    if (!c.is_moe_layer(i)) {
      fn(p + "mlp.gate_proj.weight", std::vector<int64_t>{c.intermediate_size, hidden}, l.gate_proj);
      fn(p + "mlp.up_proj.weight", std::vector<int64_t>{c.intermediate_size, hidden}, l.up_proj);
      fn(p + "mlp.down_proj.weight", std::vector<int64_t>{hidden, c.intermediate_size}, l.down_proj);
      continue;
    }
    // Qwen3MoeSparseMoeBlock as transformers saves it: the router is "gate", each expert an MLP.
    const int64_t experts = c.moe->num_experts, inter = c.moe->moe_intermediate_size;
    fn(p + "mlp.gate.weight", std::vector<int64_t>{experts, hidden}, l.router.emplace());
    l.experts.resize(static_cast<size_t>(experts));
    for (int64_t e = 0; e < experts; ++e) {
      const std::string x = p + "mlp.experts." + std::to_string(e) + ".";
      ExpertWeights& ew = l.experts[static_cast<size_t>(e)];
      fn(x + "gate_proj.weight", std::vector<int64_t>{inter, hidden}, ew.gate_proj);
      fn(x + "up_proj.weight", std::vector<int64_t>{inter, hidden}, ew.up_proj);
      fn(x + "down_proj.weight", std::vector<int64_t>{hidden, inter}, ew.down_proj);
    }
  }
  fn("model.norm.weight", std::vector<int64_t>{hidden}, w.norm);
  // Tied checkpoints may still carry lm_head.weight; transformers ignores it, and so do we.
  if (!c.tie_word_embeddings) fn("lm_head.weight", std::vector<int64_t>{c.vocab_size, hidden}, w.lm_head);
}

uint16_t element_to_bf16(DType dtype, const std::byte* element) {
  switch (dtype) {
    case DType::kBF16: {
      uint16_t bits;
      std::memcpy(&bits, element, 2);
      return bits;
    }
    case DType::kF16: {
      uint16_t bits;
      std::memcpy(&bits, element, 2);
      return float_to_bf16(fp16_to_float(bits));
    }
    case DType::kF32: {
      float value;
      std::memcpy(&value, element, 4);
      return float_to_bf16(value);
    }
  }
  return 0;
}

}  // namespace

Bf16Tensor to_bf16(const TensorRef& t) {
  Bf16Tensor out{.name = t.name, .file = t.file, .shape = t.shape};
  const size_t n = static_cast<size_t>(t.numel());
  // The mapping is page-aligned and tensors usually sit at even offsets; only an odd offset
  // (legal in the format) forces a copy of bf16 data.
  if (t.dtype == DType::kBF16 && reinterpret_cast<uintptr_t>(t.data) % alignof(uint16_t) == 0) {
    out.values = {reinterpret_cast<const uint16_t*>(t.data), n};
    return out;
  }
  auto converted = std::make_shared<std::vector<uint16_t>>(n);
  const size_t stride = dtype_size_bytes(t.dtype);
  for (size_t i = 0; i < n; ++i) (*converted)[i] = element_to_bf16(t.dtype, t.data + i * stride);
  out.values = *converted;
  out.converted = std::move(converted);
  return out;
}

std::vector<TensorSpec> model_tensor_specs(const ModelConfig& config) {
  std::vector<TensorSpec> specs;
  ModelWeights scratch;
  for_each_tensor(config, scratch, [&](std::string name, std::vector<int64_t> shape, Bf16Tensor&) {
    specs.push_back({.name = std::move(name), .dtype = DType::kBF16, .shape = std::move(shape)});
  });
  return specs;
}

Expected<ModelWeights> load_weights(const ModelConfig& config, const Checkpoint& checkpoint,
                                    const LoadOptions& options) {
  // Every tensor is found and its shape checked before any is converted, so a wrong checkpoint
  // fails at once rather than after minutes of conversion.
  ModelWeights w;
  std::vector<std::pair<TensorRef, Bf16Tensor*>> todo;
  Status status;
  uint64_t total_bytes = 0;
  for_each_tensor(config, w, [&](const std::string& name, const std::vector<int64_t>& shape, Bf16Tensor& slot) {
    if (!status.ok()) return;
    Expected<TensorRef> t = checkpoint.find(name);
    if (!t.ok()) {
      status = t.status();
    } else if (t->shape != shape) {
      status = error("{}: {} has shape {}, expected {}", t->file, name, shape_str(t->shape), shape_str(shape));
    } else {
      total_bytes += t->size_bytes;
      todo.emplace_back(std::move(t).value(), &slot);
    }
  });
  EVT_RETURN_IF_ERROR(status);

  uint64_t done_bytes = 0;
  for (const auto& [ref, slot] : todo) {
    *slot = to_bf16(ref);
    done_bytes += ref.size_bytes;
    if (options.progress) options.progress(done_bytes, total_bytes, ref.name);
  }
  if (config.tie_word_embeddings) w.lm_head = w.embed_tokens;
  return w;
}

}  // namespace evt::model
