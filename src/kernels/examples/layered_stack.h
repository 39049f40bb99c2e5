#pragma once
// A residual stack of L layers, the shape of a model's decode step in miniature: the layered
// groups of examples/layered_stack.evt, whose tile dim 0 is the layer.
//   seed  (tiles (B,)):    h[0, i, :] = x[i, :]
//   layer (tiles (L, B)):  h[l+1, i, k] = h[l, i, k] + mean over rows r of h[l, r, 0]
//   head  (tiles (B,)):    y[i] = sum over k of h[L, i, k]
// Each layer row needs every row of the layer before (the mean), as a projection needs the
// whole hidden state. Sums run in a fixed order, so every backend gets the same bits.

#include "kernels/tile_body.h"

namespace evt::kernels {

// reads (x: B x H), writes (h: (L+1) x B x H).
template <class Block>
EVT_HD void stack_seed_body(const Block& b, const int64_t* tile, const DevBuffer* reads, const DevBuffer* writes) {
  const int64_t width = reads[0].dim(1), i = tile[0];
  for (int64_t k = b.thread(); k < width; k += b.threads()) {
    writes[0].as<float>()[i * width + k] = reads[0].as<const float>()[i * width + k];
  }
}

// reads (h), writes (h): row i of layer l + 1 from all rows of layer l.
template <class Block>
EVT_HD void stack_layer_body(const Block& b, const int64_t* tile, const DevBuffer* reads, const DevBuffer* writes) {
  const int64_t rows = reads[0].dim(1), width = reads[0].dim(2), l = tile[0], i = tile[1];
  const float* in = reads[0].as<const float>() + l * rows * width;
  float* out = writes[0].as<float>() + (l + 1) * rows * width;
  float sum = 0;
  for (int64_t r = 0; r < rows; ++r) sum += in[r * width];
  const float mean = sum / static_cast<float>(rows);
  for (int64_t k = b.thread(); k < width; k += b.threads()) out[i * width + k] = in[i * width + k] + mean;
}

// reads (h), writes (y: B).
template <class Block>
EVT_HD void stack_head_body(const Block& b, const int64_t* tile, const DevBuffer* reads, const DevBuffer* writes) {
  if (b.thread() != 0) return;
  const int64_t layers = reads[0].dim(0) - 1, rows = reads[0].dim(1), width = reads[0].dim(2), i = tile[0];
  const float* last = reads[0].as<const float>() + (layers * rows + i) * width;
  float sum = 0;
  for (int64_t k = 0; k < width; ++k) sum += last[k];
  writes[0].as<float>()[i] = sum;
}

}  // namespace evt::kernels
