#pragma once
// Wait-count inference. Where every out-edge into an event is a projection-like affine map, the
// number of notifications each element receives has a closed form in the dims; the pass writes it
// into the event. Otherwise counts are left to the binding (counted per element at instantiation)
// or, for data-dependent producers, must be declared.

#include <optional>

#include "compiler/pass.h"
#include "ir/expr.h"

namespace evt::compiler {

// The number of notifications every element of event `event` receives, proved for all bindings,
// or nullopt when the out-edges into it are outside the forms the proof handles: each event
// coordinate a full slice `:`, a tile variable whose extent equals the event extent, `v//c` with
// extent c times the event extent, or the constant 0 on an extent-1 dimension.
std::optional<ir::Expr> proved_notification_count(const ir::Graph& g, const ir::Event& event);

Status infer_wait_counts(ir::Graph& g, PassContext& ctx);

}  // namespace evt::compiler
