#pragma once
// The verifier. It checks that
//  - names, shapes and ranks are consistent, and expressions use only declared dims;
//  - each event element's wait count equals the notifications it receives: proved symbolically
//    where the maps allow (see infer_wait_counts.h), otherwise checked for concrete bindings;
//  - the tile-level graph is acyclic for each binding, and no map leaves its event's shape;
//  - every awaited event has a producer; run-time wait counts are set before they are notified;
//  - index buffers are written before data-dependent maps read them;
//  - data-dependent in-edges declare their inverse (a range trigger) when dynamic scheduling
//    may run the graph.
// Every error names the task group, the edge and, for concrete checks, an offending coordinate.

#include "compiler/pass.h"

namespace evt::compiler {

Status verify(ir::Graph& g, PassContext& ctx);

// The bindings the concrete checks use when none are given: every dim set to each of these.
inline constexpr int64_t kSampleDimValues[] = {1, 2, 3, 7, 16};

}  // namespace evt::compiler
