#include "model/cpu_decoder.h"

#include <fmt/format.h>

#include <cstddef>
#include <map>
#include <optional>
#include <span>
#include <utility>

#include "ir/text_form.h"
#include "ir/tile_graph.h"
#include "model/decode_buffers.h"
#include "model/decode_megakernels.h"
#include "model/decode_weights.h"
#include "model/rope.h"
#include "runtime/cpu/executor.h"

namespace evt::model {

namespace {

// Host memory of a buffer the decoder fills, by graph buffer name.
using HostBuffers = std::map<std::string, std::span<std::byte>>;

template <typename T>
std::span<std::byte> bytes_of(std::span<const T> values) {
  return {reinterpret_cast<std::byte*>(const_cast<T*>(values.data())), values.size_bytes()};
}
template <typename T>
std::span<std::byte> bytes_of(const std::vector<T>& values) {
  return bytes_of(std::span<const T>(values));
}

template <class MK>
class CpuDecoder final : public Decoder {
 public:
  CpuDecoder(std::shared_ptr<const LoadedModel> model, const CpuDecoderOptions& o, ir::Graph graph,
             const std::vector<DecodeWeight>& weights)
      : model_(std::move(model)), options_(o), graph_(std::move(graph)) {
    const ModelConfig& c = model_->config;
    // Plain weights stay where the loader put them (the checkpoint's mapping or a converted copy);
    // the projections are packed into the tiled layout, in memory of the decoder's own.
    wtab_.assign(static_cast<size_t>(c.num_layers * kernels::llm::kWeightColumns), 0);
    for (const DecodeWeight& w : weights) {
      const uint16_t* at = w.host[0]->values.data();
      if (w.layout != WeightLayout::kPlain) {
        packed_.emplace_back(static_cast<size_t>(w.stored()));
        w.pack(packed_.back().data());
        at = packed_.back().data();
      }
      if (w.layer >= 0) wtab_[w.wtab_index()] = static_cast<int64_t>(reinterpret_cast<uintptr_t>(at));
      if (w.global == GlobalWeight::kLmHead) lm_head_ = std::span<const uint16_t>(at, static_cast<size_t>(w.stored()));
    }
    inv_freq_ = rope_inv_freq(c);
    const size_t cache = static_cast<size_t>(c.num_layers * o.kv.slots() * c.num_kv_heads * c.head_dim);
    k_cache_.assign(cache, 0);
    v_cache_.assign(cache, 0);
  }

  const ModelConfig& config() const override { return model_->config; }
  KvGeometry kv() const override { return options_.kv; }
  std::string describe() const override {
    return fmt::format("cpu {}, {} workers", exec_name(options_.exec), options_.workers);
  }
  int tiling_workers() const override { return options_.workers; }

  Status trace_next_step(const std::string& path) override {
    if (options_.exec == Exec::kReference) return error("--exec reference runs on the executor, which is not traced");
    trace_path_ = path;
    return Status();
  }

  Expected<StepOutput> step(const StepBatch& batch, bool want_logits) override {
    const ModelConfig& c = model_->config;
    const Tiling tiling = step_tiling(batch.tokens(), batch.longest_context());
    EVT_ASSIGN_OR_RETURN(StepPlan plan, plan_step(c, tiling, options_.kv, batch));
    const ModelWeights& w = model_->weights;
    const SampleInputs sampling = sample_inputs(batch);
    const HostBuffers host = {
        {"cfg", bytes_of(std::span<const int32_t>(plan.cfg))},
        {"wtab", bytes_of(wtab_)},
        {"embed", bytes_of(w.embed_tokens.values)},
        {"final_w", bytes_of(w.norm.values)},
        {"lm_w", bytes_of(lm_head_)},
        {"inv_freq", bytes_of(inv_freq_)},
        {"ids", bytes_of(batch.ids)},
        {"tok_pos", bytes_of(batch.positions)},
        {"tok_seq", bytes_of(batch.token_seq)},
        {"block_table", bytes_of(batch.block_table)},
        {"logit_rows", bytes_of(batch.logit_rows)},
        {"samp", bytes_of(sampling.words)},
        {"pen_start", bytes_of(sampling.penalty_start)},
        {"pen", bytes_of(sampling.penalties)},
        {"k_cache", bytes_of(k_cache_)},
        {"v_cache", bytes_of(v_cache_)},
    };
    std::span<const std::byte> next, logits;
    StepOutput out;
    if (options_.exec == Exec::kReference) {
      EVT_RETURN_IF_ERROR(run_reference(plan, host, next, logits));
    } else {
      EVT_RETURN_IF_ERROR(run_megakernel(plan, host, next, logits, out.stages));
    }
    out.next.resize(static_cast<size_t>(batch.sequences()));
    std::memcpy(out.next.data(), next.data(), next.size());
    if (want_logits) {
      out.logits.resize(logits.size() / sizeof(float));
      std::memcpy(out.logits.data(), logits.data(), logits.size());
    }
    return out;
  }

 private:
  Status run_reference(const StepPlan& plan, const HostBuffers& host, std::span<const std::byte>& next,
                       std::span<const std::byte>& logits) {
    const ir::Binding binding(plan.dims.begin(), plan.dims.end());
    EVT_ASSIGN_OR_RETURN(ir::TileGraph tg, ir::instantiate(graph_, binding));
    store_ = std::make_unique<runtime::cpu::BufferStore>(tg);
    for (size_t b = 0; b < graph_.buffers.size(); ++b) {
      auto it = host.find(graph_.buffers[b].name);
      if (it != host.end()) EVT_RETURN_IF_ERROR(store_->bind_external(static_cast<int>(b), it->second));
    }
    runtime::cpu::ExecOptions o;
    o.workers = options_.workers;
    EVT_RETURN_IF_ERROR(runtime::cpu::execute(tg, kernels::Registry::builtins(), *store_, o).status());
    next = store_->bytes(graph_.buffer_index("next"));
    logits = store_->bytes(graph_.buffer_index("logits"));
    return Status();
  }

  Status run_megakernel(const StepPlan& plan, const HostBuffers& host, std::span<const std::byte>& next,
                        std::span<const std::byte>& logits, std::vector<StageTime>& stages) {
    EVT_ASSIGN_OR_RETURN(mk::ParamsOf<MK> p, unbound_params<MK>(plan));
    scratch_.resize(MK::num_buffers);
    for (int b = 0; b < MK::num_buffers; ++b) {
      const int64_t bytes = buffer_bytes<MK>(p, b);
      auto it = host.find(MK::buffer_name(b));
      if (it != host.end()) {
        if (static_cast<int64_t>(it->second.size()) != bytes) {
          return error("decode step: buffer {} holds {} bytes, the graph needs {}", MK::buffer_name(b),
                       it->second.size(), bytes);
        }
        p.buffers[b].data = it->second.data();
      } else {
        if (static_cast<int64_t>(scratch_[b].size()) * 8 < bytes) scratch_[b].resize(static_cast<size_t>((bytes + 7) / 8));
        p.buffers[b].data = scratch_[b].data();
      }
    }
    typename mk::CpuMegakernel<MK>::Options o;
    o.workers = options_.workers;
    o.schedule = schedule_of(options_.exec);
    const std::optional<std::string> trace_path = std::exchange(trace_path_, std::nullopt);
    o.trace = trace_path.has_value();
    const Status ran = megakernel_.run(p, o);
    if (trace_path) {
      EVT_ASSIGN_OR_RETURN(stages, finish_trace<MK>(p, megakernel_.last_trace(), *trace_path));
    }
    EVT_RETURN_IF_ERROR(ran);
    const auto view = [&](const char* name) {
      const int b = buffer_index<MK>(name);
      return std::span<const std::byte>(static_cast<const std::byte*>(p.buffers[b].data),
                                        static_cast<size_t>(buffer_bytes<MK>(p, b)));
    };
    next = view("next");
    logits = view("logits");
    return Status();
  }

  std::shared_ptr<const LoadedModel> model_;
  CpuDecoderOptions options_;
  ir::Graph graph_;
  std::vector<int64_t> wtab_;
  std::vector<std::vector<uint16_t>> packed_;  // the tiled projections
  std::span<const uint16_t> lm_head_;
  std::vector<float> inv_freq_;
  std::vector<uint16_t> k_cache_, v_cache_;
  std::vector<std::vector<uint64_t>> scratch_;            // megakernel scratch, per buffer
  std::unique_ptr<runtime::cpu::BufferStore> store_;     // the reference run's buffers
  mk::CpuMegakernel<MK> megakernel_;
  std::optional<std::string> trace_path_;  // set: trace the next step (and write it there unless empty)
};

template <class MK>
Expected<std::unique_ptr<Decoder>> make(std::shared_ptr<const LoadedModel> model, const CpuDecoderOptions& o) {
  EVT_ASSIGN_OR_RETURN(ir::Graph graph, ir::parse_graph(MK::graph_text(), "decode graph"));
  EVT_ASSIGN_OR_RETURN(const std::vector<DecodeWeight> weights,
                       decode_weights(model->config, &model->weights, weight_tiling(model->config, o.workers)));
  return std::unique_ptr<Decoder>(std::make_unique<CpuDecoder<MK>>(std::move(model), o, std::move(graph), weights));
}

}  // namespace

Expected<std::unique_ptr<Decoder>> make_cpu_decoder(std::shared_ptr<const LoadedModel> model,
                                                    const CpuDecoderOptions& options) {
  if (options.exec == Exec::kGraphs) return error("--exec graphs needs --device cuda (it captures CUDA graphs)");
  if (options.workers < 1) return error("the CPU backend needs at least one worker, got {}", options.workers);
  if (options.kv.page_size < 1 || options.kv.pages < 1) {
    return error("KV cache: page size {} and pages {} must be positive", options.kv.page_size, options.kv.pages);
  }
  EVT_RETURN_IF_ERROR(check_decodable(model->config));
  return with_decode_megakernel(model->config, [&]<class MK>() { return make<MK>(std::move(model), options); });
}

}  // namespace evt::model
