#!/usr/bin/env python3
"""PyTorch reference for `eventide bench moe`: one Qwen3-MoE sparse block on T tokens.

Two ways PyTorch runs the block, random bf16 weights of the given shapes:
  hf-loop     Hugging Face's Qwen3MoeSparseMoeBlock algorithm, eager: router, softmax top-k
              (renormalized), then a loop over the experts that were hit, each gathering its rows,
              gate/up, SiLU, down, and index_add into the output. The loop syncs with the host.
  grouped-mm  no host sync: the (token, slot) rows sorted by expert, gate/up and down as two
              grouped GEMMs (torch._grouped_mm, as torchtitan runs MoE; an empty group reads no
              weights), captured in one CUDA graph per weight copy and replayed.
Each call uses the next of --layers copies of the weights, so repeated calls do not find them
in L2. Times are CUDA-event medians of whole calls, in microseconds.

Usage (on the GPU machine):
  python3 torch_moe.py --tokens 1,8,32,128,1024 [--json out.jsonl]
Prints one JSON object per (tokens, impl) and a table last.
"""
import argparse
import json

import torch
import torch.nn.functional as F

dev = torch.device("cuda")


def median_us(fn, iters, warm=3):
    for _ in range(warm):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(iters):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        fn()
        e.record()
        torch.cuda.synchronize()
        times.append(s.elapsed_time(e) * 1e3)
    times.sort()
    return times[len(times) // 2]


class Layers:
    """`count` copies of one sparse block's weights, used in turn."""

    def __init__(self, count, hidden, experts, inter, seed=0):
        g = torch.Generator(device=dev).manual_seed(seed)

        def w(*shape):
            return torch.randn(*shape, device=dev, dtype=torch.bfloat16, generator=g) * 0.02

        self.router = [w(experts, hidden) for _ in range(count)]
        self.gate_up = [w(experts, 2 * inter, hidden) for _ in range(count)]
        self.down = [w(experts, hidden, inter) for _ in range(count)]
        self.count, self.at = count, 0

    def weights(self, i):
        return self.router[i], self.gate_up[i], self.down[i]

    def next(self):
        i = self.at
        self.at = (self.at + 1) % self.count
        return self.weights(i)


def route(x, router, top_k):
    probs = F.softmax((x @ router.t()).float(), dim=-1)
    weights, ids = torch.topk(probs, top_k, dim=-1)
    return (weights / weights.sum(dim=-1, keepdim=True)).to(x.dtype), ids


def hf_loop(x, router, gate_up, down, top_k):
    weights, ids = route(x, router, top_k)
    out = torch.zeros_like(x)
    inter = down.shape[2]
    mask = F.one_hot(ids, num_classes=router.shape[0]).permute(2, 1, 0)  # (E, k, T)
    for e in torch.nonzero(mask.sum(dim=(-1, -2)) > 0).flatten().tolist():
        slot, token = torch.where(mask[e])
        h = x[token] @ gate_up[e].t()
        y = (F.silu(h[:, :inter]) * h[:, inter:]) @ down[e].t()
        out.index_add_(0, token, y * weights[token, slot, None])
    return out


def grouped_mm(x, router, gate_up, down, top_k):
    weights, ids = route(x, router, top_k)
    inter, flat = down.shape[2], ids.flatten()
    order = torch.argsort(flat, stable=True)
    token = order // top_k
    counts = torch.zeros(router.shape[0], device=dev, dtype=torch.int32)
    counts.index_add_(0, flat, torch.ones_like(flat, dtype=torch.int32))  # bincount would sync
    offs = torch.cumsum(counts, 0, dtype=torch.int32)
    h = torch._grouped_mm(x[token], gate_up.transpose(-2, -1), offs=offs)
    y = torch._grouped_mm(F.silu(h[:, :inter]) * h[:, inter:], down.transpose(-2, -1), offs=offs)
    return torch.zeros_like(x).index_add_(0, token, y * weights.flatten()[order, None])


def graphed(fn, layers, x, top_k):
    """fn captured in one CUDA graph per weight copy (each copy's addresses are baked in)."""
    graphs = []
    for _ in range(layers.count):
        r, gu, dn = layers.next()
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(2):  # warm up outside the capture
                fn(x, r, gu, dn, top_k)
        torch.cuda.current_stream().wait_stream(side)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            fn(x, r, gu, dn, top_k)
        graphs.append(g)
    state = {"at": 0}

    def replay():
        graphs[state["at"]].replay()
        state["at"] = (state["at"] + 1) % len(graphs)

    return replay


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tokens", default="1,8,32,128,1024", help="token counts, comma-separated")
    ap.add_argument("--hidden", type=int, default=2048)
    ap.add_argument("--experts", type=int, default=128)
    ap.add_argument("--top-k", type=int, default=8)
    ap.add_argument("--moe-intermediate", type=int, default=768)
    ap.add_argument("--layers", type=int, default=8, help="weight copies used in turn")
    ap.add_argument("--iters", type=int, default=30)
    ap.add_argument("--json", help="append one JSON object per measurement to this file")
    a = ap.parse_args()

    layers = Layers(a.layers, a.hidden, a.experts, a.moe_intermediate)
    rows = []
    for t in [int(v) for v in a.tokens.split(",")]:
        x = torch.randn(t, a.hidden, device=dev, dtype=torch.bfloat16)
        _, ids = route(x, layers.router[0], a.top_k)
        hit = int(torch.unique(ids).numel())
        ref = hf_loop(x, *layers.weights(0), a.top_k)
        for name in ("hf-loop", "grouped-mm"):
            row = {"tokens": t, "impl": name, "experts_hit": hit, "torch": torch.__version__,
                   "device": torch.cuda.get_device_name()}
            try:
                if name == "hf-loop":
                    fn = lambda: hf_loop(x, *layers.next(), a.top_k)
                else:  # the same sums as the HF loop, in another order
                    got = grouped_mm(x, *layers.weights(0), a.top_k)
                    row["max_abs_diff_vs_hf_loop"] = float((got.float() - ref.float()).abs().max())
                    fn = graphed(grouped_mm, layers, x, a.top_k)
                row["median_us"] = median_us(fn, a.iters)
            except Exception as e:  # report and go on: one impl's failure must not hide the others
                row["error"] = f"{type(e).__name__}: {e}"
            rows.append(row)
            print(json.dumps(row), flush=True)
            if a.json:
                with open(a.json, "a") as f:
                    f.write(json.dumps(row) + "\n")
    print(f"{'tokens':>6} {'impl':<11} {'median us':>10} {'experts':>8}")
    for r in rows:
        us = f"{r['median_us']:>10.1f}" if "median_us" in r else "     error"
        print(f"{r['tokens']:>6} {r['impl']:<11} {us} {r['experts_hit']:>8}")


if __name__ == "__main__":
    main()
