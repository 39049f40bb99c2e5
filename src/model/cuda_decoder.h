#pragma once
// The CUDA backend: the dense decode step as one megakernel launch (static or dynamic
// schedule), or the same generated code launched per task group (kernels) or replayed from
// CUDA graphs captured per batch bucket (graphs: the vLLM/SGLang approach, the baseline).

#include <memory>
#include <vector>

#include "model/decoder.h"
#include "model/loaded_model.h"

namespace evt::model {

struct CudaDecoderOptions {
  Exec exec = Exec::kMegakernel;  // megakernel, megakernel-dynamic, megakernel-mixed, kernels or graphs
  int device = 0;
  int blocks = 0;  // megakernel grid (at most the co-resident blocks); 0: every co-resident block
  KvGeometry kv{16, 1024};  // pages 0: kv_fraction of the GPU memory free after the weights
  double kv_fraction = 0.8;
  // Graphs mode: decode steps (one token per sequence) are padded to the smallest bucket that
  // holds them and replayed from a graph captured once per bucket; the block table is
  // max_context wide and the KV split count fixed by max_context, as graph capture needs
  // fixed shapes. Other steps (prefill) run as plain kernel launches, as vLLM runs them.
  std::vector<int64_t> graph_buckets = {1, 2, 4, 8, 16, 32, 64, 128, 256};
  int64_t max_context = 4096;
  // Megakernel mode: steps of more than 16 tokens run the entry of wide passes (kernels/llm/gemv.h)
  // always (1), never (0), or as wide_pass_sets says for the model (-1). EVT_WIDE_PASSES, when set,
  // overrides it.
  int wide_passes = -1;
};

// Uploads a loaded model's weights.
Expected<std::unique_ptr<Decoder>> make_cuda_decoder(std::shared_ptr<const LoadedModel> model,
                                                     const CudaDecoderOptions& options);

// Random weights with the config's shapes, generated on the GPU (no checkpoint, no disk):
// linear weights uniform with std 0.5 / sqrt(fan_in), embeddings std 0.25, norms 1 +- 0.1.
Expected<std::unique_ptr<Decoder>> make_cuda_decoder_random(const ModelConfig& config, uint64_t seed,
                                                            const CudaDecoderOptions& options);

}  // namespace evt::model
