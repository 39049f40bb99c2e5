#include "runtime/megakernel/trace.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <fstream>
#include <map>

#include "runtime/megakernel/support.h"

namespace evt::mk {

std::vector<TraceEvent> decode_trace(std::span<const uint64_t> words, int workers, int64_t tasks_per_worker) {
  std::vector<TraceEvent> events;
  const int64_t stride = 1 + kTraceWords * tasks_per_worker;
  for (int w = 0; w < workers; ++w) {
    const uint64_t* mine = words.data() + w * stride;
    const int64_t n = std::min<int64_t>(static_cast<int64_t>(mine[0]), tasks_per_worker);
    for (int64_t k = 0; k < n; ++k) {
      const uint64_t* r = mine + 1 + kTraceWords * k;
      const auto id = static_cast<int64_t>(r[0]);
      TraceEvent e{w, task_id_group(id), task_id_linear(id), r[1], r[2], r[3], {}};
      for (int b = 0; b < kTraceBarriers; ++b) {
        const auto offset = static_cast<uint32_t>(r[4 + b / 2] >> (32 * (b % 2)));
        if (offset == 0) break;
        e.barriers_ns.push_back(e.start_ns + offset - 1);
      }
      const uint64_t between = r[kTraceWords - 1];
      const auto handout = static_cast<uint32_t>(between), recorded = static_cast<uint32_t>(between >> 32);
      if (handout != 0) e.handout_ns = e.start_ns - (handout - 1);
      e.recorded_ns = e.end_ns + (recorded > 0 ? recorded - 1 : 0);
      events.push_back(std::move(e));
    }
  }
  return events;
}

std::vector<StageSpan> stage_spans(std::span<const TraceEvent> events,
                                   const std::function<int64_t(int, int64_t)>& layer_of) {
  std::map<std::pair<int, int64_t>, StageSpan> spans;
  for (const TraceEvent& e : events) {
    const int64_t layer = layer_of(e.group, e.linear);
    auto [it, added] = spans.try_emplace({e.group, layer}, StageSpan{e.group, layer, e.start_ns, e.end_ns, 0});
    StageSpan& s = it->second;
    s.start_ns = std::min(s.start_ns, e.start_ns);
    s.end_ns = std::max(s.end_ns, e.end_ns);
    ++s.tasks;
  }
  std::vector<StageSpan> out;
  for (const auto& [key, span] : spans) out.push_back(span);
  return out;
}

Status write_chrome_trace(const std::string& path, const std::vector<TraceEvent>& events,
                          const std::function<std::string(int, int64_t)>& task_name) {
  uint64_t origin = UINT64_MAX;
  for (const auto& e : events) origin = std::min(origin, e.start_ns);
  auto us = [&](uint64_t ns) { return static_cast<double>(ns - origin) / 1e3; };
  nlohmann::json trace = nlohmann::json::array();
  for (const auto& e : events) {
    const std::string name = task_name(e.group, e.linear);
    nlohmann::json barriers = nlohmann::json::array();
    for (const uint64_t t : e.barriers_ns) barriers.push_back(us(t) - us(e.start_ns));
    nlohmann::json args = {{"wait_us", us(e.waited_ns) - us(e.start_ns)}, {"barriers_us", barriers},
                           {"recorded_after_us", us(e.recorded_ns) - us(e.end_ns)}};
    if (e.handout_ns != 0) args["handout_before_us"] = us(e.start_ns) - us(e.handout_ns);
    trace.push_back({{"name", name}, {"cat", "task"}, {"ph", "X"}, {"pid", 0}, {"tid", e.worker},
                     {"ts", us(e.start_ns)}, {"dur", us(e.end_ns) - us(e.start_ns)}, {"args", args}});
    if (e.waited_ns > e.start_ns) {
      trace.push_back({{"name", "wait"}, {"cat", "wait"}, {"ph", "X"}, {"pid", 0}, {"tid", e.worker},
                       {"ts", us(e.start_ns)}, {"dur", us(e.waited_ns) - us(e.start_ns)}});
    }
  }
  std::ofstream out(path);
  if (!out) return error("cannot write the trace to {}", path);
  out << nlohmann::json{{"traceEvents", trace}, {"displayTimeUnit", "ns"}}.dump() << "\n";
  return out ? Status() : error("writing the trace to {} failed", path);
}

}  // namespace evt::mk
