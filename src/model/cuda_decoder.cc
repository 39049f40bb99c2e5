#include "model/cuda_decoder.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <optional>
#include <utility>

#include "kernels/llm/decode_config.h"
#include "kernels/llm/gemv.h"
#include "kernels/llm/sample.h"
#include "model/decode_buffers.h"
#include "model/decode_megakernels.h"
#include "model/decode_weights.h"
#include "model/random_fill_cuda.h"
#include "model/rope.h"
#include "runtime/megakernel/cuda_instance.h"
#include "runtime/megakernel/trace.h"
#include "util/int_math.h"

namespace evt::model {

namespace {

namespace llm = kernels::llm;
using mk::DeviceWords;


// Host memory the GPU can copy from asynchronously.
class PinnedBytes {
 public:
  PinnedBytes() = default;
  PinnedBytes(const PinnedBytes&) = delete;
  PinnedBytes& operator=(const PinnedBytes&) = delete;
  ~PinnedBytes() {
    if (data_) cudaFreeHost(data_);
  }
  Status reserve(size_t n) {
    if (n <= size_) return Status();
    if (data_) cudaFreeHost(data_);
    data_ = nullptr;
    size_ = 0;
    EVT_CUDA_RETURN(cudaMallocHost(&data_, n));
    size_ = n;
    return Status();
  }
  std::byte* data() const { return static_cast<std::byte*>(data_); }

 private:
  void* data_ = nullptr;
  size_t size_ = 0;
};

// The model's weights on the device: one arena, per-layer addresses in wtab (host copy) and the
// global tensors.
struct DeviceWeights {
  DeviceWords arena;
  int64_t bytes = 0;
  std::vector<int64_t> wtab;  // L x kWeightColumns device addresses
  int64_t embed = 0, final_norm = 0, lm_head = 0;
};

Status place_weights(const ModelConfig& c, const ModelWeights* host, const Tiling& tiling, uint64_t seed,
                     cudaStream_t stream, DeviceWeights& w) {
  w.wtab.assign(static_cast<size_t>(c.num_layers * llm::kWeightColumns), 0);
  EVT_ASSIGN_OR_RETURN(const std::vector<DecodeWeight> list, decode_weights(c, host, tiling));
  std::vector<int64_t> offsets;  // bytes into the arena, per weight
  int64_t at = 0;
  for (const DecodeWeight& p : list) {
    offsets.push_back(at);
    at = round_up(at + p.stored() * 2, 256);
  }
  w.bytes = at;
  if (Status s = w.arena.reserve(static_cast<size_t>(ceil_div(at, 8))); !s.ok()) {
    return error("cannot allocate {:.2f} GB of GPU memory for the weights: {}", at / 1e9, s.message());
  }
  auto* base = reinterpret_cast<std::byte*>(w.arena.data());
  std::vector<uint16_t> packed;  // one weight in its stored layout, on its way to the device
  for (size_t i = 0; i < list.size(); ++i) {
    const DecodeWeight& p = list[i];
    auto* dst = reinterpret_cast<uint16_t*>(base + offsets[i]);
    const auto address = static_cast<int64_t>(reinterpret_cast<uintptr_t>(dst));
    switch (p.global) {
      case GlobalWeight::kEmbed: w.embed = address; break;
      case GlobalWeight::kFinalNorm: w.final_norm = address; break;
      case GlobalWeight::kLmHead: w.lm_head = address; break;
      case GlobalWeight::kNone: w.wtab[p.wtab_index()] = address; break;
    }
    if (!p.host.empty()) {
      packed.resize(static_cast<size_t>(p.stored()));
      p.pack(packed.data());
      EVT_CUDA_RETURN(cudaMemcpy(dst, packed.data(), packed.size() * 2, cudaMemcpyHostToDevice));
    } else {
      const float scale = p.fan_in > 0 ? 0.5f * std::sqrt(3.0f / static_cast<float>(p.fan_in))
                          : p.fan_in < 0 ? 0.25f * std::sqrt(3.0f)
                                         : 0.1f;
      EVT_CUDA_RETURN(fill_random_bf16(dst, p.stored(), seed * 1000 + i, scale, p.fan_in == 0 ? 1.0f : 0.0f, stream));
    }
  }
  EVT_CUDA_RETURN(cudaStreamSynchronize(stream));
  return Status();
}

// The step's host inputs, staged in one pinned buffer and copied with one transfer.
struct StagedInput {
  const char* buffer;
  const void* data;
  int64_t bytes;
};

template <class MK>
class CudaDecoder final : public Decoder {
 public:
  static Expected<std::unique_ptr<Decoder>> create(const ModelConfig& config, std::shared_ptr<const LoadedModel> model,
                                                   uint64_t seed, const CudaDecoderOptions& o) {
    auto d = std::unique_ptr<CudaDecoder>(new CudaDecoder(config, std::move(model), o));
    EVT_ASSIGN_OR_RETURN(d->megakernel_, mk::CudaMegakernel<MK>::create(o.device));
    EVT_CUDA_RETURN(cudaStreamCreateWithFlags(&d->stream_, cudaStreamNonBlocking));
    EVT_CUDA_RETURN(cudaEventCreate(&d->start_));
    EVT_CUDA_RETURN(cudaEventCreate(&d->end_));
    EVT_RETURN_IF_ERROR(place_weights(config, d->model_ ? &d->model_->weights : nullptr,
                                      weight_tiling(config, d->blocks()), seed, d->stream_, d->weights_));
    if (d->options_.kv.pages == 0) {
      EVT_ASSIGN_OR_RETURN(d->options_.kv.pages, d->pages_that_fit());
    }
    EVT_RETURN_IF_ERROR(d->upload_constants());
    return std::unique_ptr<Decoder>(std::move(d));
  }

  ~CudaDecoder() override {
    if (start_) cudaEventDestroy(start_);
    if (end_) cudaEventDestroy(end_);
    if (stream_) cudaStreamDestroy(stream_);
  }

  const ModelConfig& config() const override { return config_; }
  KvGeometry kv() const override { return options_.kv; }
  std::string describe() const override {
    return fmt::format("cuda {}, {} SMs, {} blocks, {:.2f} GB of weights, KV cache {} pages of {} ({:.2f} GB)",
                       exec_name(options_.exec), megakernel_->sms(), blocks(), weights_.bytes / 1e9,
                       options_.kv.pages, options_.kv.page_size, options_.kv.pages * page_bytes() / 1e9);
  }
  DecoderStats stats() const override { return stats_; }
  int tiling_workers() const override { return blocks(); }

  Status trace_next_step(const std::string& path) override {
    if (options_.exec == Exec::kGraphs) {
      return error("--exec graphs: traces cover the launches of the megakernel and kernels modes, not graph replays");
    }
    trace_path_ = path;
    return Status();
  }

  Expected<StepOutput> step(const StepBatch& batch, bool want_logits) override {
    const bool replay = options_.exec == Exec::kGraphs && batch.tokens() == batch.sequences() &&
                        batch.tokens() <= options_.graph_buckets.back();
    const StepBatch& run = replay ? padded(batch) : batch;
    const int64_t longest = replay ? options_.max_context : run.longest_context();
    Tiling tiling = step_tiling(run.tokens(), longest);
    // The static schedule's steps of more than 16 tokens may run the entry of wide passes.
    if (schedule_of(options_.exec) == mk::kStatic && run.tokens() > kernels::llm::kPassTokens) {
      const int asked = mk::wide_passes() >= 0 ? mk::wide_passes() : options_.wide_passes;
      const int rule = wide_pass_sets(config_, tiling.workers);
      tiling.pass_sets = asked < 0 ? rule : asked == 1 ? kernels::llm::kWidePassSets : 1;
    }
    EVT_ASSIGN_OR_RETURN(StepPlan plan, plan_step(config_, tiling, cache_geometry(), run));
    if (replay) plan.set_kv_splits(ceil_div(options_.max_context, tiling.kv_split_len), tiling.workers);

    EVT_ASSIGN_OR_RETURN(mk::ParamsOf<MK> p, unbound_params<MK>(plan));
    const SampleInputs sampling = sample_inputs(run);
    const StagedInput inputs[] = {
        {"cfg", plan.cfg.data(), static_cast<int64_t>(sizeof plan.cfg)},
        {"ids", run.ids.data(), run.tokens() * 4},
        {"tok_pos", run.positions.data(), run.tokens() * 4},
        {"tok_seq", run.token_seq.data(), run.tokens() * 4},
        {"block_table", run.block_table.data(), static_cast<int64_t>(run.block_table.size()) * 4},
        {"logit_rows", run.logit_rows.data(), run.sequences() * 4},
        {"samp", sampling.words.data(), static_cast<int64_t>(sampling.words.size()) * 4},
        {"pen_start", sampling.penalty_start.data(), static_cast<int64_t>(sampling.penalty_start.size()) * 4},
        {"pen", sampling.penalties.data(), static_cast<int64_t>(sampling.penalties.size()) * 4},
    };
    EVT_RETURN_IF_ERROR(bind(p, inputs));
    typename mk::CudaMegakernel<MK>::Options o;
    o.stream = stream_;
    o.schedule = schedule_of(options_.exec);
    o.cuda_graph = replay;
    o.blocks = blocks();
    o.scratch_bytes = static_cast<int>(plan.scratch_bytes);
    o.ring_stages = plan.ring_stages;
    o.wide_passes = tiling.pass_sets > 1;
    const std::optional<std::string> trace_path = std::exchange(trace_path_, std::nullopt);
    o.trace = trace_path.has_value();
    EVT_CUDA_RETURN(cudaEventRecord(start_, stream_));
    EVT_RETURN_IF_ERROR(megakernel_->enqueue(p, o));
    EVT_CUDA_RETURN(cudaEventRecord(end_, stream_));
    EVT_RETURN_IF_ERROR(megakernel_->finish());
    if (replay) {
      stats_.capture_ms += megakernel_->last_capture_ms();
      stats_.graphs_captured = static_cast<int64_t>(megakernel_->captured_graphs());
    }
    StepOutput out;
    if (trace_path) {
      EVT_ASSIGN_OR_RETURN(out.stages, finish_trace<MK>(p, megakernel_->last_trace(), *trace_path));
    }
    float ms = 0;
    EVT_CUDA_RETURN(cudaEventElapsedTime(&ms, start_, end_));
    out.device_ms = ms;
    out.next.resize(static_cast<size_t>(batch.sequences()));
    EVT_CUDA_RETURN(cudaMemcpy(out.next.data(), p.buffers[buffer_index<MK>("next")].data, out.next.size() * 4,
                               cudaMemcpyDeviceToHost));
    if (want_logits) {
      out.logits.resize(static_cast<size_t>(batch.sequences() * config_.vocab_size));
      EVT_CUDA_RETURN(cudaMemcpy(out.logits.data(), p.buffers[buffer_index<MK>("logits")].data,
                                 out.logits.size() * 4, cudaMemcpyDeviceToHost));
    }
    return out;
  }

 private:
  CudaDecoder(const ModelConfig& config, std::shared_ptr<const LoadedModel> model, const CudaDecoderOptions& o)
      : config_(config), model_(std::move(model)), options_(o) {}

  // The persistent grid: every block that fits co-resident (the kernels mode launches as many),
  // since the bodies' loads need several blocks per SM in flight.
  int blocks() const {
    return options_.blocks > 0 ? std::min(options_.blocks, megakernel_->max_coresident_blocks())
                               : megakernel_->max_coresident_blocks();
  }

  // K and V of one page over every layer.
  int64_t page_bytes() const {
    return 2 * config_.num_layers * options_.kv.page_size * config_.num_kv_heads * config_.head_dim * 2;
  }

  // The KV pages in options_.kv_fraction of the free memory (the weights already placed).
  Expected<int64_t> pages_that_fit() const {
    size_t free = 0, total = 0;
    EVT_CUDA_RETURN(cudaMemGetInfo(&free, &total));
    const auto pages = static_cast<int64_t>(options_.kv_fraction * static_cast<double>(free)) / page_bytes() - 1;
    if (pages < 1) {
      return error("KV cache: {:.2f} GB free after the weights; {:.0f}% of it holds no page of {} bytes", free / 1e9,
                   options_.kv_fraction * 100, page_bytes());
    }
    return pages;
  }

  // The caller's pages plus one: graph padding's dummy sequences write their K/V to the last.
  KvGeometry cache_geometry() const { return KvGeometry{options_.kv.page_size, options_.kv.pages + 1}; }

  Status upload_constants() {
    const std::vector<float> inv_freq = rope_inv_freq(config_);
    EVT_RETURN_IF_ERROR(constants_.reserve(static_cast<size_t>(ceil_div(
        static_cast<int64_t>(weights_.wtab.size()) * 8 + static_cast<int64_t>(inv_freq.size()) * 4 + 256, 8))));
    auto* base = reinterpret_cast<std::byte*>(constants_.data());
    wtab_ = base;
    inv_freq_ = base + round_up(static_cast<int64_t>(weights_.wtab.size()) * 8, 256);
    EVT_CUDA_RETURN(cudaMemcpy(wtab_, weights_.wtab.data(), weights_.wtab.size() * 8, cudaMemcpyHostToDevice));
    EVT_CUDA_RETURN(cudaMemcpy(inv_freq_, inv_freq.data(), inv_freq.size() * 4, cudaMemcpyHostToDevice));
    const KvGeometry g = cache_geometry();
    const size_t cache_words = static_cast<size_t>(
        ceil_div(config_.num_layers * g.slots() * config_.num_kv_heads * config_.head_dim * 2, 8));
    if (Status s = k_cache_.reserve(cache_words); !s.ok()) return error("KV cache ({} pages): {}", g.pages, s.message());
    if (Status s = v_cache_.reserve(cache_words); !s.ok()) return error("KV cache ({} pages): {}", g.pages, s.message());
    return Status();
  }

  // A decode step padded to its graph bucket: the extra sequences read token 0 at position 0
  // and own only the dummy page, and every block-table row is max_context wide.
  const StepBatch& padded(const StepBatch& batch) {
    const int64_t n = batch.tokens();
    const int64_t bucket = *std::lower_bound(options_.graph_buckets.begin(), options_.graph_buckets.end(), n);
    const int64_t width = ceil_div(options_.max_context, options_.kv.page_size);
    const int32_t dummy = static_cast<int32_t>(options_.kv.pages);
    padded_ = batch;
    padded_.pages_per_seq = width;
    padded_.block_table.assign(static_cast<size_t>(bucket * width), dummy);
    for (int64_t s = 0; s < n; ++s) {
      std::copy_n(batch.block_table.begin() + s * batch.pages_per_seq, batch.pages_per_seq,
                  padded_.block_table.begin() + s * width);
    }
    for (int64_t s = n; s < bucket; ++s) {
      padded_.ids.push_back(0);
      padded_.positions.push_back(0);
      padded_.token_seq.push_back(static_cast<int32_t>(s));
      padded_.logit_rows.push_back(static_cast<int32_t>(s));
      if (!padded_.sample_words.empty()) padded_.sample_words.resize(padded_.sample_words.size() + llm::kSampleWords, 0);
      if (!padded_.penalty_start.empty()) padded_.penalty_start.push_back(padded_.penalty_start.back());
    }
    return padded_;
  }

  // Points every buffer at device memory: the persistent ones, the staged inputs (copied now)
  // and scratch that only grows, so a graph bucket sees the same addresses every step.
  Status bind(mk::ParamsOf<MK>& p, std::span<const StagedInput> inputs) {
    int64_t total = 0;
    for (const StagedInput& in : inputs) total += round_up(in.bytes, 256);
    EVT_RETURN_IF_ERROR(staging_.reserve(static_cast<size_t>(total)));
    EVT_RETURN_IF_ERROR(inputs_.reserve(static_cast<size_t>(ceil_div(total, 8))));
    int64_t at = 0;
    for (const StagedInput& in : inputs) {
      std::memcpy(staging_.data() + at, in.data, static_cast<size_t>(in.bytes));
      p.buffers[buffer_index<MK>(in.buffer)].data = reinterpret_cast<std::byte*>(inputs_.data()) + at;
      at += round_up(in.bytes, 256);
    }
    EVT_CUDA_RETURN(cudaMemcpyAsync(inputs_.data(), staging_.data(), static_cast<size_t>(at), cudaMemcpyHostToDevice,
                                    stream_));
    const auto address = [](int64_t a) { return reinterpret_cast<void*>(static_cast<uintptr_t>(a)); };
    p.buffers[buffer_index<MK>("wtab")].data = wtab_;
    p.buffers[buffer_index<MK>("inv_freq")].data = inv_freq_;
    p.buffers[buffer_index<MK>("embed")].data = address(weights_.embed);
    p.buffers[buffer_index<MK>("final_w")].data = address(weights_.final_norm);
    p.buffers[buffer_index<MK>("lm_w")].data = address(weights_.lm_head);
    p.buffers[buffer_index<MK>("k_cache")].data = k_cache_.data();
    p.buffers[buffer_index<MK>("v_cache")].data = v_cache_.data();
    scratch_.resize(MK::num_buffers);
    for (int b = 0; b < MK::num_buffers; ++b) {
      if (p.buffers[b].data != nullptr) continue;
      EVT_RETURN_IF_ERROR(scratch_[b].reserve(static_cast<size_t>(ceil_div(buffer_bytes<MK>(p, b), 8))));
      p.buffers[b].data = scratch_[b].data();
    }
    return Status();
  }

  ModelConfig config_;
  std::shared_ptr<const LoadedModel> model_;  // null for random weights
  CudaDecoderOptions options_;
  std::unique_ptr<mk::CudaMegakernel<MK>> megakernel_;
  cudaStream_t stream_ = nullptr;
  cudaEvent_t start_ = nullptr, end_ = nullptr;  // around each step's kernels
  DeviceWeights weights_;
  DeviceWords constants_, k_cache_, v_cache_, inputs_;
  void* wtab_ = nullptr;
  void* inv_freq_ = nullptr;
  PinnedBytes staging_;
  std::vector<DeviceWords> scratch_;
  StepBatch padded_;
  DecoderStats stats_;
  std::optional<std::string> trace_path_;  // set: trace the next step (and write it there unless empty)
};

Expected<std::unique_ptr<Decoder>> make(const ModelConfig& config, std::shared_ptr<const LoadedModel> model,
                                        uint64_t seed, const CudaDecoderOptions& o) {
  if (o.exec == Exec::kReference) return error("--exec reference runs on the CPU only (--device cpu)");
  if (o.kv.page_size < 1 || o.kv.pages < 0) {
    return error("KV cache: page size {} must be positive and pages {} not negative", o.kv.page_size, o.kv.pages);
  }
  if (!(o.kv_fraction > 0 && o.kv_fraction < 1)) return error("KV cache: fraction {} must be in (0, 1)", o.kv_fraction);
  if (o.graph_buckets.empty() || !std::is_sorted(o.graph_buckets.begin(), o.graph_buckets.end())) {
    return error("graph buckets must be a non-empty ascending list");
  }
  EVT_RETURN_IF_ERROR(check_decodable(config));
  return with_decode_megakernel(config, [&]<class MK>() {
    return CudaDecoder<MK>::create(config, std::move(model), seed, o);
  });
}

}  // namespace

Expected<std::unique_ptr<Decoder>> make_cuda_decoder(std::shared_ptr<const LoadedModel> model,
                                                     const CudaDecoderOptions& options) {
  const ModelConfig config = model->config;
  return make(config, std::move(model), 0, options);
}

Expected<std::unique_ptr<Decoder>> make_cuda_decoder_random(const ModelConfig& config, uint64_t seed,
                                                            const CudaDecoderOptions& options) {
  return make(config, nullptr, seed, options);
}

}  // namespace evt::model
