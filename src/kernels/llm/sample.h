#pragma once
// Sampling: tile s draws the next token of row s from its logits, by the parameters of its request.
//   reads (logits: S x V f32, samp: S x kSampleWords i32 (sample_math.h), pen_start: S + 1 i32,
//          pen: P x 2 i32, best: S x NV x 2 f32, each LM head tile's largest logit and its index
//          (lm_head.h)), writes (next: S i32, adj: S x V f32, scratch of unspecified contents)
//
// The rules, which the body and the CPU reference (sample.cc) both follow to the bit (exp, log and
// the random bits are sample_math.h's):
// 1. a_i = logits[s][i] - (presence + frequency * count) for each penalty entry (i, count) in
//    pen[pen_start[s], pen_start[s + 1]) (the host gives distinct tokens; ids outside [0, V) are
//    ignored); every other a_i = logits[s][i].
// 2. Greedy when temperature <= 0 (or NaN) or top_k == 1: next = the argmax of a, the lowest index
//    on a tie and a NaN counting as the largest value (the argmax row's rule).
// 3. Otherwise z_i = a_i / temperature; a NaN z is never kept; m = the largest z. Thresholds:
//    - tau_k, when 0 < top_k < V: the top_k-th largest z counting multiplicity (-inf when fewer z
//      are numbers); otherwise -inf.
//    - tau_p, when top_p < 1: with masses q_i = top_p_mass(z_i, m) = floor(e^(z_i - m) * 2^32) for
//      z_i >= tau_k and 0 otherwise, Q = sum q_i and target = top_p_target(top_p, Q) =
//      max(1, ceil(double(top_p) * double(Q))), the largest z value v with sum_{z_i >= v} q_i >=
//      target; otherwise -inf. Integer masses make Q independent of the order of summation.
//    - tau_m, when min_p > 0: m + log(min(min_p, 1)); otherwise -inf.
//    Token i is kept iff z_i >= max(tau_k, tau_p, tau_m): top-k, then top-p over what top-k kept,
//    then min-p, Hugging Face's order. The largest z is always kept.
// 4. next = the argmax over kept i of z_i + gumbel(draw_stream(seed, counter), i), the lowest index
//    on a tie: the Gumbel-max trick, a draw from softmax(z) over the kept tokens that needs no
//    prefix sum and depends on the request's seed and counter alone. next = 0 when every z is NaN.
//    The noise has 24 random bits, so it lies in [-2.9, 16.7]: a token more than 19.5 below m is
//    never drawn (its share of softmax is below 4e-9 of the largest's).
//
// The body: greedy without penalties is the best of the LM head tiles' choices (the argmax of the
// row, since each tile's is the first largest of its rows by the same order). Otherwise one pass
// writes z (a for greedy) to the row of adj, and the passes after it read adj; a threshold is a
// radix select over an order-preserving u32 key of z, 4 passes of 8 bits with a shared-memory
// histogram (counts for top-k, u64 masses for top-p), integer atomics only, so the result does not
// depend on the order in which threads add.

#include "kernels/llm/sample_math.h"
#include "kernels/llm/warp_ops.h"

namespace evt::kernels::llm {

// (value, index) with the larger value winning, NaN above everything, the lower index on a tie.
EVT_HD inline bool better(float v, int64_t i, float best_v, int64_t best_i) {
  const bool v_nan = v != v, best_nan = best_v != best_v;
  if (v_nan || best_nan) return v_nan && (!best_nan || i < best_i);
  return v > best_v || (v == best_v && i < best_i);
}

struct Candidate {
  float value;
  int64_t index;
};

// The block's shared memory between the passes of a tile (a thread's own on the host).
struct SampleShared {
  uint64_t hist[256];  // a radix pass's weight per digit
  uint64_t need;       // the weight left to find within the digits found so far
  uint32_t prefix;     // the digits found so far
  bool found;          // whether the first pass's total reached the need
  float best_value[32];  // each warp's best candidate
  int64_t best_index[32];
};

EVT_HD inline SampleShared& sample_shared() {
#if defined(__CUDA_ARCH__)
  __shared__ SampleShared shared;
#else
  static thread_local SampleShared shared;
#endif
  return shared;
}

// Calls one(i, row[i]) or eight(i, row + i as 8 floats) so that every i < n is visited once,
// spread over the block: 16-byte loads over the part of the row that starts 16-byte aligned
// (a row of odd length may start anywhere), single loads at its ends.
template <class Block, class One, class Eight>
EVT_HD void for_each_piece(const Block& b, const float* row, int64_t n, One&& one, Eight&& eight) {
  const int64_t misaligned = static_cast<int64_t>(reinterpret_cast<uintptr_t>(row) % 16 / 4);
  const int64_t head = min_of<int64_t>(n, (4 - misaligned) % 4);
  const int64_t chunks = (n - head) / 8, tail = head + 8 * chunks;
  for (int64_t i = b.thread(); i < head; i += b.threads()) one(i, row[i]);
  for (int64_t c = b.thread(); c < chunks; c += b.threads()) {
    float v[8];
    load8_f32(row + head + 8 * c, v);
    eight(head + 8 * c, v);
  }
  for (int64_t i = tail + b.thread(); i < n; i += b.threads()) one(i, row[i]);
}

// Calls f(i, row[i]) for every i < n, spread over the block (for_each_piece).
template <class Block, class F>
EVT_HD void for_each_value(const Block& b, const float* row, int64_t n, F&& f) {
  for_each_piece(b, row, n, f, [&](int64_t i, const float* v) {
    EVT_UNROLL
    for (int k = 0; k < 8; ++k) f(i + k, v[k]);
  });
}

// The block's best candidate by better(), returned to every thread.
template <class Block>
EVT_HD Candidate block_best(const Block& b, Candidate c) {
#if defined(__CUDA_ARCH__)
  for (int offset = 16; offset > 0; offset /= 2) {
    const float v = __shfl_xor_sync(0xffffffffu, c.value, offset);
    const int64_t i = __shfl_xor_sync(0xffffffffu, c.index, offset);
    if (better(v, i, c.value, c.index)) c = Candidate{v, i};
  }
  SampleShared& sh = sample_shared();
  if (lane(b) == 0) {
    sh.best_value[warp(b)] = c.value;
    sh.best_index[warp(b)] = c.index;
  }
  b.sync();
  for (int w = 0; w < warps(b); ++w) {
    if (better(sh.best_value[w], sh.best_index[w], c.value, c.index)) c = Candidate{sh.best_value[w], sh.best_index[w]};
  }
  b.sync();  // the slots are written again by the next reduction
#else
  (void)b;
#endif
  return c;
}

// The greedy choice over row[0, n): the index of its largest value by better() (0 when n = 0).
template <class Block>
EVT_HD int64_t block_argmax(const Block& b, const float* row, int64_t n) {
  Candidate c{-INFINITY, n};
  for_each_value(b, row, n, [&](int64_t i, float v) {
    if (better(v, i, c.value, c.index)) c = Candidate{v, i};
  });
  c = block_best(b, c);
  return c.index < n ? c.index : 0;
}

// adj = (logits - penalties) / t, which the later passes read: every element first, then the
// penalized ones again. 16-byte stores where adj's row is aligned as the logits' row is (always,
// for buffers at 16-byte aligned addresses), since single stores of 8 consecutive floats per
// thread would cost the write 8 times the L2 traffic.
template <class Block>
EVT_HD void adjust_row(const Block& b, const float* logits, float* adj, int64_t vocab, const int32_t* pen,
                       int64_t n_pen, const SampleParams& p, float t) {
  const bool vector_stores = (reinterpret_cast<uintptr_t>(adj) - reinterpret_cast<uintptr_t>(logits)) % 16 == 0;
  for_each_piece(
      b, logits, vocab, [&](int64_t i, float v) { adj[i] = v / t; },
      [&](int64_t i, const float* v) {
        float out[8];
        EVT_UNROLL
        for (int k = 0; k < 8; ++k) out[k] = v[k] / t;
        if (vector_stores) {
          store8_f32(adj + i, out);
        } else {
          EVT_UNROLL
          for (int k = 0; k < 8; ++k) adj[i + k] = out[k];
        }
      });
  b.sync();
  for (int64_t e = b.thread(); e < n_pen; e += b.threads()) {
    const int32_t token = pen[2 * e], count = pen[2 * e + 1];
    if (token >= 0 && token < vocab) adj[token] = (logits[token] - penalty(p, count)) / t;
  }
  b.sync();
}

// A thread's weight for one histogram bin, added with one atomic per run of elements in that bin
// rather than one per element: a thread's consecutive elements often share their leading key
// digits (logits cluster in a few exponents), where atomics of the whole block would pile up.
struct BinRun {
  int bin = 0;
  uint64_t weight = 0;
  EVT_HD void add(uint64_t* hist, int d, uint64_t w) {
    if (d != bin) flush(hist);
    bin = d;
    weight += w;
  }
  EVT_HD void flush(uint64_t* hist) {
    if (weight > 0) shared_add(hist + bin, weight);
    weight = 0;
  }
};

// Warp 0's part of a radix pass: the digit d where the weight counted from the top bin down
// reaches the need, i.e. sum(hist[d + 1 ..]) < need <= sum(hist[d ..]). Leaves the prefix with d
// and the need left within bin d in `sh`. The first pass (`total_need`) derives the need from the
// total weight and records whether the total reaches it.
template <class Block, class TotalNeed>
EVT_HD void find_digit(const Block& b, SampleShared& sh, uint32_t prefix, int shift, TotalNeed&& total_need) {
  constexpr int kPerLane = 256 / lanes();
  const int top = 256 - lane(b) * kPerLane;  // this lane's bins are [top - kPerLane, top), lane 0's the highest
  uint64_t mine = 0;
  for (int d = top - kPerLane; d < top; ++d) mine += sh.hist[d];
  const LaneSums sums = warp_lane_sums(mine, lane(b));
  const bool first = shift == 24;
  const uint64_t need = first ? total_need(sums.total) : sh.need;
  warp_sync();  // every lane has read sh.need before the crossing lane rewrites it
  if (first && lane(b) == 0) sh.found = sums.total >= need;
  if (sums.below < need && need <= sums.below + mine) {  // one lane: the crossing is in its bins
    uint64_t above = sums.below;
    int d = top - 1;
    while (above + sh.hist[d] < need) above += sh.hist[d--];
    sh.prefix = prefix | static_cast<uint32_t>(d) << shift;
    sh.need = need - above;
  }
}

// Radix select over the keys of z[0, n): the largest key K such that the weights of the elements
// with keys >= K sum to at least total_need(total), where total sums all weights; false when the
// total falls short. weight(v, key) is called for non-NaN values only, and 0 leaves one out. Each
// pass fixes 8 more bits of K, histogramming the elements that match the bits fixed so far.
template <class Block, class Weight, class TotalNeed>
EVT_HD bool select_key(const Block& b, const float* z, int64_t n, Weight&& weight, TotalNeed&& total_need,
                       uint32_t* key) {
  SampleShared& sh = sample_shared();
  uint32_t prefix = 0;
  for (int shift = 24; shift >= 0; shift -= 8) {
    const uint32_t fixed = shift == 24 ? 0u : ~0u << (shift + 8);  // the bits of K found so far
    for (int d = b.thread(); d < 256; d += b.threads()) sh.hist[d] = 0;
    b.sync();
    BinRun run;
    for_each_value(b, z, n, [&](int64_t, float v) {
      if (v != v) return;
      const uint32_t k = order_key(v);
      if ((k & fixed) != prefix) return;
      const uint64_t w = weight(v, k);
      if (w > 0) run.add(sh.hist, static_cast<int>(k >> shift & 255u), w);
    });
    run.flush(sh.hist);
    b.sync();
    if (warp(b) == 0) find_digit(b, sh, prefix, shift, total_need);
    b.sync();
    if (!sh.found) return false;
    prefix = sh.prefix;
  }
  *key = prefix;
  return true;
}

// The largest non-NaN value of z[0, n) (-inf when there is none), to every thread.
template <class Block>
EVT_HD float block_max(const Block& b, const float* z, int64_t n) {
  float m = -INFINITY;
  for_each_value(b, z, n, [&](int64_t, float v) { m = fmaxf(m, v); });  // fmaxf passes over a NaN
  return block_best(b, Candidate{m, 0}).value;
}

// Rules 3 and 4 of the header over z = adj's row.
template <class Block>
EVT_HD int64_t draw(const Block& b, const float* z, int64_t vocab, const SampleParams& p) {
  const float m = block_max(b, z, vocab);
  uint32_t keep = 0;  // the key of max(tau_k, tau_p, tau_m); 0 keeps every number
  if (top_k_on(p, vocab)) {
    select_key(
        b, z, vocab, [](float, uint32_t) { return uint64_t{1}; },
        [&](uint64_t) { return static_cast<uint64_t>(p.top_k); }, &keep);
  }
  if (top_p_on(p)) {
    const uint32_t keep_k = keep;
    uint32_t key_p = 0;
    select_key(
        b, z, vocab, [&](float v, uint32_t k) { return k >= keep_k ? top_p_mass(v, m) : 0; },
        [&](uint64_t total) { return top_p_target(p.top_p, total); }, &key_p);
    keep = max_of(keep, key_p);
  }
  if (min_p_on(p)) keep = max_of(keep, order_key(min_p_threshold(m, p.min_p)));
  const uint64_t stream = draw_stream(p.seed, p.counter);
  Candidate c{-INFINITY, vocab};
  for_each_value(b, z, vocab, [&](int64_t i, float v) {
    if (v != v || order_key(v) < keep) return;
    const float g = v + gumbel(stream, i);
    if (better(g, i, c.value, c.index)) c = Candidate{g, i};
  });
  c = block_best(b, c);
  return c.index < vocab ? c.index : 0;
}

template <class Block>
EVT_HD void sample_body(const Block& b, const int64_t* tile, const DevBuffer* reads, const DevBuffer* writes) {
  const int64_t s = tile[0], vocab = reads[0].dim(1);
  const float* logits = reads[0].as<const float>() + s * vocab;
  const SampleParams p = unpack_sample_row(reads[1].as<const int32_t>() + s * kSampleWords);
  const int32_t* pen_start = reads[2].as<const int32_t>();
  const int32_t* pen = reads[3].as<const int32_t>() + 2 * static_cast<int64_t>(pen_start[s]);
  const int64_t n_pen = pen_start[s + 1] - pen_start[s];
  const bool greedy = is_greedy(p);
  int64_t next;
  if (greedy && n_pen == 0) {
    const int64_t tiles = reads[4].dim(1);
    const float* best = reads[4].as<const float>() + s * tiles * 2;
    Candidate c{-INFINITY, vocab};
    for (int64_t n = b.thread(); n < tiles; n += b.threads()) {
      const auto index = static_cast<int64_t>(best[2 * n + 1]);
      if (better(best[2 * n], index, c.value, c.index)) c = Candidate{best[2 * n], index};
    }
    c = block_best(b, c);
    next = c.index < vocab ? c.index : 0;
  } else {
    const float* z = logits;
    if (n_pen > 0 || !greedy) {
      float* adj = writes[1].as<float>() + s * vocab;
      adjust_row(b, logits, adj, vocab, pen, n_pen, p, greedy ? 1.0f : p.temperature);
      z = adj;
    }
    next = greedy ? block_argmax(b, z, vocab) : draw(b, z, vocab, p);
  }
  if (b.thread() == 0) writes[0].as<int32_t>()[s] = static_cast<int32_t>(next);
}

}  // namespace evt::kernels::llm
