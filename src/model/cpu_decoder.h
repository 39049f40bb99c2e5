#pragma once
// The CPU backend: the dense decode graph on host threads, either as the generated megakernel
// (the same code the GPU runs, on CpuWorker threads) or on the CPU executor with the naive
// references (Exec::kReference). CI runs the model fixtures through both. A model with sparse MoE
// layers runs the MoE decode graph (moe_graph.h) and its megakernel.

#include <memory>

#include "model/decoder.h"
#include "model/loaded_model.h"

namespace evt::model {

struct CpuDecoderOptions {
  Exec exec = Exec::kMegakernel;  // reference, megakernel, megakernel-dynamic, megakernel-mixed or kernels
  int workers = 4;                // threads standing in for SMs
  KvGeometry kv{16, 256};         // page size, pages
};

// Fails for an exec mode the CPU does not have (graphs) and for a model no compiled graph fits.
Expected<std::unique_ptr<Decoder>> make_cpu_decoder(std::shared_ptr<const LoadedModel> model,
                                                    const CpuDecoderOptions& options);

}  // namespace evt::model
