// Session::tune_with: per-kernel variant search on the device, and the cached winners applied at build.
//
// For each dispatch of the step whose archetype has candidates (codegen/variant.hpp), every candidate is
// generated, compiled and run alone on the session's own buffers: `warmup` untimed dispatches, then
// `iterations` dispatches each between two timestamps (a barrier before each, so runs do not overlap); the
// median is the candidate's time. The current variant is always candidate 0, and a different one wins only
// when it is at least kMinGain faster (timing noise must not churn variants). Kernels with equal tuning keys
// (base_hash) are searched once. The step's persistent buffers are saved before and restored after, then the
// step is re-recorded with the winners.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <sstream>

#include "meganeura/codegen/variant.hpp"
#include "meganeura/session/session_impl.hpp"
#include "meganeura/session/tune_cache.hpp"

namespace meganeura {

namespace {

constexpr double kMinGain = 0.03;  // a new variant must be 3 % faster than the current one

using Clock = std::chrono::steady_clock;

double median(std::vector<double> v) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  const size_t h = v.size() / 2;
  return v.size() % 2 ? v[h] : (v[h - 1] + v[h]) / 2.0;
}

void check(const TuneOptions& o) {
  auto bad = [](const std::string& field, const std::string& want, const std::string& got) {
    return ConfigError("[Session::tune_with] expected TuneOptions::" + field + " " + want + ", got " + got);
  };
  if (o.iterations < 1) throw bad("iterations", ">= 1", std::to_string(o.iterations));
  if (o.warmup < 0) throw bad("warmup", ">= 0", std::to_string(o.warmup));
  if (o.max_candidates < 0) throw bad("max_candidates", ">= 0 (0: all)", std::to_string(o.max_candidates));
  if (!(o.time_budget_s >= 0) || o.time_budget_s > 1e9)
    throw bad("time_budget_s", ">= 0 seconds (0: none)", std::to_string(o.time_budget_s));
  std::string names;
  for (const std::string& a : o.archetypes) {
    bool known = false;
    names.clear();
    for (Archetype t : {Archetype::Pointwise, Archetype::RowReduce, Archetype::MatMul, Archetype::Copy,
                        Archetype::Gather, Archetype::Optimizer, Archetype::Accumulate}) {
      names += (names.empty() ? "" : ", ") + std::string(archetype_name(t));
      known = known || a == archetype_name(t);
    }
    if (!known) throw bad("archetypes", "to name tunable archetypes (" + names + ")", "'" + a + "'");
  }
}

bool selected(const TuneOptions& o, Archetype a) {
  if (!tunable(a)) return false;
  if (o.archetypes.empty()) return true;
  return std::find(o.archetypes.begin(), o.archetypes.end(), archetype_name(a)) != o.archetypes.end();
}

// Every buffer the step keeps between steps, to put back after candidates have run on them.
struct Saved {
  size_t slot;
  std::vector<unsigned char> bytes;
};

std::vector<Saved> save_state(SessionImpl& s) {
  std::vector<Saved> out;
  s.device->wait();
  for (size_t i = 0; i < s.step.plan.slots.size(); ++i) {
    const Slot& sl = s.step.plan.slots[i];
    if (in_arena(sl.kind) || sl.bytes == 0) continue;
    Saved v{i, std::vector<unsigned char>(sl.bytes)};
    s.device->download(s.slot_buffer[i], v.bytes.data(), sl.bytes);
    out.push_back(std::move(v));
  }
  return out;
}

void restore_state(SessionImpl& s, const std::vector<Saved>& saved) {
  s.device->wait();
  for (const Saved& v : saved) s.device->upload(s.slot_buffer[v.slot], v.bytes.data(), v.bytes.size());
}

// Median nanoseconds of one dispatch run alone.
double time_dispatch(SessionImpl& s, const GeneratedKernel& k, runtime::KernelId id, const TuneOptions& o) {
  std::vector<runtime::Buffer> bufs;
  for (const Binding& b : k.bindings) bufs.push_back(binding_buffer(s, b));
  const auto push = std::as_bytes(std::span(k.push));
  const bool ts = s.device->caps().timestamps;
  const uint32_t n = uint32_t(o.iterations);
  std::unique_ptr<runtime::CommandList> list = s.device->record(ts ? 2 * n : 0);
  list->begin_label("tune " + k.label);
  for (int w = 0; ts && w < o.warmup; ++w) {
    list->barrier();
    list->dispatch(id, bufs, push, k.grid[0], k.grid[1], k.grid[2]);
  }
  for (uint32_t i = 0; i < n; ++i) {
    list->barrier();
    if (ts) list->timestamp(2 * i);
    list->dispatch(id, bufs, push, k.grid[0], k.grid[1], k.grid[2]);
    if (ts) list->timestamp(2 * i + 1);
  }
  list->barrier();
  list->end_label();
  list->finish();
  if (!ts) {  // wall clock: one untimed submission as warm-up, then the mean of one timed submission
    if (o.warmup > 0) {
      s.device->submit(*list);
      s.device->wait();
    }
    const auto a = Clock::now();
    s.device->submit(*list);
    s.device->wait();
    return std::chrono::duration<double, std::nano>(Clock::now() - a).count() / double(n);
  }
  s.device->submit(*list);
  s.device->wait();
  const std::vector<double> t = s.device->timestamps(*list);
  std::vector<double> samples;
  for (uint32_t i = 0; i < n; ++i) samples.push_back(t.at(2 * i + 1) - t.at(2 * i));
  return median(samples);
}

size_t dispatches_of(const CompiledStep& step, size_t kernel) {
  return size_t(std::count_if(step.code.begin(), step.code.end(), [&](const GeneratedKernel& k) { return k.kernel == kernel; }));
}

std::string fixed(double v, int digits) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

}  // namespace

std::string TuneReport::to_text() const {
  std::ostringstream os;
  os << "tuning on " << device << " (" << timer << "): " << changed << " of " << kernels.size()
     << " dispatches changed in " << fixed(seconds, 2) << " s";
  if (!cache_path.empty()) os << "; cache " << cache_path;
  os << "\n";
  double before = 0, after = 0;
  for (const TuneKernel& k : kernels) {
    os << "  #" << k.dispatch << " " << k.archetype << " [" << k.label << "] ";
    if (k.candidates == 0) {
      os << k.new_variant << " (" << (k.note.empty() ? "not timed" : k.note) << ")";
      if (k.old_variant != k.new_variant) os << " was " << k.old_variant;
      os << "\n";
      continue;
    }
    before += k.old_us;
    after += k.new_us;
    os << k.old_variant << " " << fixed(k.old_us, 2) << " us -> " << k.new_variant << " " << fixed(k.new_us, 2)
       << " us (" << k.candidates << " candidates)\n";
  }
  os << "  timed dispatches alone: " << fixed(before, 2) << " us -> " << fixed(after, 2) << " us\n";
  return os.str();
}

void apply_tune_cache(CompiledStep& step, const std::string& cache_dir, const runtime::DeviceCaps& caps) {
  const std::string path = tune_cache_path(cache_dir, caps);
  if (path.empty()) return;
  const TuneCache cache = tune_cache_load(path, caps);
  for (GeneratedKernel& k : step.code) {
    auto it = cache.find(k.base_hash);
    if (it == cache.end() || it->second.variant == k.tuned || !tunable(k.arch)) continue;
    if (dispatches_of(step, k.kernel) != 1) continue;  // split-K: see tune_with
    try {
      std::vector<GeneratedKernel> v =
          generate_kernel(step.graph, step.kernels, k.kernel, caps, step.codegen, it->second.variant);
      if (v.size() == 1) k = std::move(v[0]);
    } catch (const Error& e) {
      std::fprintf(stderr, "meganeura: warning: the tuning cache '%s' names variant '%s' for kernel [%s], which no "
                   "longer generates (%s); using the default\n", path.c_str(), it->second.variant.to_string().c_str(),
                   k.label.c_str(), e.what());
    }
  }
}

TuneReport Session::tune_with(const TuneOptions& o) { return tune(*impl_, o); }

TuneReport tune(SessionImpl& s, const TuneOptions& o) {
  check(o);
  const runtime::DeviceCaps& caps = s.device->caps();
  const auto start = Clock::now();
  auto elapsed = [&] { return std::chrono::duration<double>(Clock::now() - start).count(); };
  TuneReport r;
  r.device = caps.name;
  r.timer = caps.timestamps ? "gpu timestamps" : "wall clock";
  r.cache_path = o.cache ? tune_cache_path(s.config.cache_dir, caps) : "";
  const TuneCache cached = o.cache ? tune_cache_load(r.cache_path, caps) : TuneCache{};
  TuneCache found;  // this search's winners by tuning key (stored when the cache is on)

  s.collect_gpu_spans();
  const std::vector<Saved> saved = save_state(s);
  std::map<uint64_t, runtime::KernelId> ids;  // compiled kernels by content hash
  for (size_t i = 0; i < s.step.code.size(); ++i) ids[s.step.code[i].hash] = s.kernel_of[i];
  auto kernel_id = [&](const GeneratedKernel& k) {
    auto it = ids.find(k.hash);
    if (it != ids.end()) return it->second;
    const runtime::KernelId id = s.device->create_kernel(kernel_desc(s, k));
    ids[k.hash] = id;
    return id;
  };
  // Replaces dispatch i's code with `variant` (already known to generate).
  auto adopt = [&](size_t i, GeneratedKernel k) {
    s.kernel_of[i] = kernel_id(k);
    s.step.code[i] = std::move(k);
  };
  auto regenerate = [&](const GeneratedKernel& cur, const KernelVariant& v) {
    std::vector<GeneratedKernel> out = generate_kernel(s.step.graph, s.step.kernels, cur.kernel, caps, s.step.codegen, v);
    if (out.size() != 1) throw ConfigError("[Session::tune_with] expected one dispatch per tuned kernel");
    return std::move(out[0]);
  };

  try {
    for (size_t i = 0; i < s.step.code.size(); ++i) {
      const GeneratedKernel cur = s.step.code[i];
      TuneKernel tk;
      tk.dispatch = i;
      tk.label = cur.label;
      tk.archetype = archetype_name(cur.arch);
      tk.old_variant = tk.new_variant = cur.tuned.to_string();
      auto finish = [&](const std::string& note) {
        tk.note = note;
        tk.new_variant = s.step.code[i].tuned.to_string();
        if (tk.new_variant != tk.old_variant) ++r.changed;
        r.kernels.push_back(tk);
      };
      if (!tunable(cur.arch)) { finish("not tunable"); continue; }
      // One dispatch is timed and replaced at a time: a kernel of two (split-K) keeps its variant for now.
      if (dispatches_of(s.step, cur.kernel) != 1) { finish("split-K: two dispatches, not timed"); continue; }
      if (!selected(o, cur.arch)) { finish("not selected"); continue; }
      // A winner already known (from disk, or an equal kernel earlier in this step) is applied without timing.
      const TuneCacheEntry* known = nullptr;
      if (auto it = found.find(cur.base_hash); it != found.end()) known = &it->second;
      else if (auto jt = cached.find(cur.base_hash); jt != cached.end()) known = &jt->second;
      if (known) {
        if (known->variant != cur.tuned) {
          try {
            adopt(i, regenerate(cur, known->variant));
          } catch (const Error& e) {
            finish(std::string("known winner ") + known->variant.to_string() + " failed: " + e.what());
            continue;
          }
        }
        finish(found.count(cur.base_hash) ? "same kernel as an earlier dispatch" : "cached");
        continue;
      }
      if (o.time_budget_s > 0 && elapsed() > o.time_budget_s) { finish("time budget"); continue; }

      std::vector<KernelVariant> cands{cur.tuned};
      for (const KernelVariant& v : tune_candidates(s.step.graph, s.step.kernels, cur.kernel, caps, s.step.codegen))
        if (std::find(cands.begin(), cands.end(), v) == cands.end()) cands.push_back(v);
      if (o.max_candidates > 0 && cands.size() > size_t(o.max_candidates)) cands.resize(size_t(o.max_candidates));

      std::map<uint64_t, double> timed;  // by content hash: explicit spellings of one kernel are timed once
      double best_ns = 0;
      GeneratedKernel best = cur;
      for (size_t c = 0; c < cands.size(); ++c) {
        GeneratedKernel gk;
        runtime::KernelId id = 0;
        try {
          gk = c == 0 ? cur : regenerate(cur, cands[c]);
          if (timed.count(gk.hash)) continue;
          id = kernel_id(gk);
        } catch (const Error&) {
          continue;  // this variant cannot run this kernel on this device
        }
        const double ns = time_dispatch(s, gk, id, o);
        timed[gk.hash] = ns;
        ++tk.candidates;
        if (c == 0) {
          best_ns = ns;
          tk.old_us = ns / 1000.0;
        } else if (ns < best_ns * (1.0 - kMinGain)) {
          best_ns = ns;
          best = gk;
        }
      }
      tk.new_us = best_ns / 1000.0;
      if (best.hash != cur.hash) adopt(i, best);
      finish("");
      found[cur.base_hash] = {s.step.code[i].tuned, cur.label, tk.archetype, tk.old_us, tk.new_us};
    }
  } catch (...) {
    try {
      restore_state(s, saved);
      record(s);
    } catch (...) {
    }
    throw;
  }
  restore_state(s, saved);
  s.device->wait();
  record(s);
  if (o.cache && !found.empty()) tune_cache_store(r.cache_path, caps, found);
  r.seconds = elapsed();
  return r;
}

}  // namespace meganeura
