#pragma once
// Embedding gather: tile n copies columns [n * rows_h, ...) of every token's embedding row into
// layer 0 of the residual stream.
//   reads (cfg, ids: T i32, embed: V x H bf16), writes (x: 2 x T x H bf16; row 0 is written)

#include "kernels/llm/decode_config.h"

namespace evt::kernels::llm {

template <class Block>
EVT_HD void embed_gather_body(const Block& b, const int64_t* tile, const DevBuffer* reads, const DevBuffer* writes) {
  const int32_t* cfg = reads[0].as<const int32_t>();
  const int32_t* ids = reads[1].as<const int32_t>();
  const uint16_t* embed = reads[2].as<const uint16_t>();
  uint16_t* x = writes[0].as<uint16_t>();
  const int64_t tokens = writes[0].dim(1), hidden = writes[0].dim(2);
  const Range cols = tile_range(tile[0], cfg[kCfgRowsH], hidden);
  const int64_t width = cols.end - cols.begin;
  for (int64_t i = b.thread(); i < tokens * width; i += b.threads()) {
    const int64_t t = i / width, c = cols.begin + i % width;
    x[t * hidden + c] = embed[static_cast<int64_t>(ids[t]) * hidden + c];
  }
}

}  // namespace evt::kernels::llm
