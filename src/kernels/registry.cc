#include "kernels/registry.h"

#include "util/check.h"

namespace evt::kernels {

namespace {
Registry& mutable_builtins() {
  static Registry registry;
  return registry;
}
}  // namespace

void Registry::add(TileFunction fn) {
  std::string name = fn.name;
  rows_[name] = std::move(fn);
}

const TileFunction* Registry::find(const std::string& name) const {
  auto it = rows_.find(name);
  return it == rows_.end() ? nullptr : &it->second;
}

const Registry& Registry::builtins() { return mutable_builtins(); }

bool Registry::register_builtin(TileFunction fn) {
  // Rows register from static initializers in any order; a second one of the same name would
  // silently replace the first, and a graph calling the first would run the second.
  EVT_CHECK(mutable_builtins().find(fn.name) == nullptr) << "two built-in tile functions are named " << fn.name;
  mutable_builtins().add(std::move(fn));
  return true;
}

}  // namespace evt::kernels
