// Session::tune_with: per-kernel variant search on the device, and the cached winners applied at build.
//
// For each kernel of the step whose archetype has candidates (codegen/variant.hpp), every candidate is
// generated, compiled and run alone on the session's own buffers: `warmup` untimed runs, then `iterations`
// runs each between two timestamps (a barrier before each dispatch, so runs do not overlap); the median is
// the candidate's time. A run is all of the kernel's dispatches (a Mixed16 matmul's f16 copy and product),
// and a split kernel can be replaced by an unsplit one and back, within the scratch and tickets the memory
// plan already holds. The current variant is always candidate 0, and a different one wins only when it is at
// least kMinGain faster (timing noise must not churn variants). Kernels with equal tuning keys (base_hash)
// are searched once. The step's persistent buffers are saved before and restored after, then the step is
// re-recorded with the winners.
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

// Median nanoseconds of one kernel's dispatches (a barrier before each) run alone.
double time_group(SessionImpl& s, const std::vector<GeneratedKernel>& ks,
                  const std::vector<runtime::KernelId>& ids, const TuneOptions& o) {
  std::vector<std::vector<runtime::Buffer>> bufs(ks.size());
  for (size_t j = 0; j < ks.size(); ++j)
    for (const Binding& b : ks[j].bindings) bufs[j].push_back(binding_buffer(s, b));
  const bool ts = s.device->caps().timestamps;
  const uint32_t n = uint32_t(o.iterations);
  std::unique_ptr<runtime::CommandList> list = s.device->record(ts ? 2 * n : 0);
  list->begin_label("tune " + ks.back().label);
  auto run = [&] {
    for (size_t j = 0; j < ks.size(); ++j) {
      list->barrier();
      list->dispatch(ids[j], bufs[j], std::as_bytes(std::span(ks[j].push)), ks[j].grid[0], ks[j].grid[1],
                     ks[j].grid[2]);
    }
  };
  for (int w = 0; ts && w < o.warmup; ++w) run();
  for (uint32_t i = 0; i < n; ++i) {
    list->barrier();
    if (ts) list->timestamp(2 * i);
    run();
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

// The number of dispatches from `first` on that belong to the same kernel (consecutive: a first pass comes
// right before its kernel's last).
size_t group_size(const std::vector<GeneratedKernel>& code, size_t first) {
  size_t n = 1;
  while (first + n < code.size() && code[first + n].kernel == code[first].kernel) ++n;
  return n;
}

// A kernel's dispatches as one key (equal spellings of one variant are timed once).
uint64_t group_hash(const std::vector<GeneratedKernel>& ks) {
  uint64_t h = 1469598103934665603ull;
  for (const GeneratedKernel& k : ks) h = (h ^ k.hash) * 1099511628211ull;
  return h;
}

std::string fixed(double v, int digits) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

}  // namespace

std::string TuneReport::to_text() const {
  std::ostringstream os;
  const size_t passes = size_t(std::count_if(kernels.begin(), kernels.end(), [](const TuneKernel& k) {
    return k.note.rfind("a first pass of its kernel", 0) == 0;
  }));
  os << "tuning on " << device << " (" << timer << "): " << changed << " of " << kernels.size() - passes
     << " kernels changed in " << fixed(seconds, 2) << " s";
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
    os << k.old_variant << " " << fixed(k.old_us, 2) << " us -> " << k.new_variant << " "
       << fixed(k.new_us, 2) << " us (" << k.candidates << " candidates)\n";
  }
  os << "  timed dispatches alone: " << fixed(before, 2) << " us -> " << fixed(after, 2) << " us\n";
  return os.str();
}

void apply_tune_cache(CompiledStep& step, const std::string& cache_dir, const runtime::DeviceCaps& caps) {
  const std::string path = tune_cache_path(cache_dir, caps);
  if (path.empty()) return;
  const TuneCache cache = tune_cache_load(path, caps);
  // Runs before the memory plan, so a winner may have another number of dispatches (split-K or not).
  std::vector<GeneratedKernel> code;
  for (size_t i = 0; i < step.code.size();) {
    const size_t n = group_size(step.code, i);
    const GeneratedKernel& k = step.code[i + n - 1];
    auto it = cache.find(k.base_hash);
    bool replaced = false;
    if (it != cache.end() && it->second.variant != k.tuned && tunable(k.arch)) {
      try {
        for (GeneratedKernel& g :
             generate_kernel(step.graph, step.kernels, k.kernel, caps, step.codegen, it->second.variant))
          code.push_back(std::move(g));
        replaced = true;
      } catch (const Error& e) {
        std::fprintf(stderr,
                     "meganeura: warning: the tuning cache '%s' names variant '%s' for kernel [%s], which no "
                     "longer generates (%s); using the default\n",
                     path.c_str(), it->second.variant.to_string().c_str(), k.label.c_str(), e.what());
      }
    }
    if (!replaced)
      for (size_t j = 0; j < n; ++j) code.push_back(step.code[i + j]);
    i += n;
  }
  step.code = std::move(code);
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
  // Replaces the n dispatches of one kernel from i on with `ks` (already known to generate and fit the plan);
  // returns how many dispatches the kernel has now.
  auto adopt = [&](size_t i, size_t n, std::vector<GeneratedKernel> ks) {
    std::vector<runtime::KernelId> kid;
    for (const GeneratedKernel& k : ks) kid.push_back(kernel_id(k));
    s.step.code.erase(s.step.code.begin() + long(i), s.step.code.begin() + long(i + n));
    s.step.code.insert(s.step.code.begin() + long(i), ks.begin(), ks.end());
    s.kernel_of.erase(s.kernel_of.begin() + long(i), s.kernel_of.begin() + long(i + n));
    s.kernel_of.insert(s.kernel_of.begin() + long(i), kid.begin(), kid.end());
    return ks.size();
  };
  // A variant's dispatches. Scratch and tickets (split-K's partial products and counters) must fit what the
  // plan already holds for the kernel: the plan is not redone during the search.
  auto regenerate = [&](const GeneratedKernel& cur, const KernelVariant& v) {
    std::vector<GeneratedKernel> out =
        generate_kernel(s.step.graph, s.step.kernels, cur.kernel, caps, s.step.codegen, v);
    for (const GeneratedKernel& k : out)
      for (const Binding& b : k.bindings) {
        if (b.kind != Binding::Scratch && b.kind != Binding::Tickets) continue;
        const bool scratch = b.kind == Binding::Scratch;
        const auto& held = scratch ? s.step.plan.scratch : s.step.plan.tickets;
        auto it = held.find(b.node);
        if (it == held.end() || s.step.plan.slots.at(it->second).bytes < b.offset + b.bytes)
          throw ConfigError("[Session::tune_with] variant " + v.to_string() + " of [" + cur.label +
                            "] needs " + std::to_string(b.offset + b.bytes) + " bytes of " +
                            (scratch ? "scratch" : "split-K tickets") + " the memory plan does not hold");
      }
    return out;
  };

  try {
    // One kernel at a time: its dispatches (two for split-K or Mixed16's f16 copy) are timed and replaced
    // together. The report keeps a row per dispatch of the step as built; a first pass's row points at the
    // next.
    size_t before = 0;  // the kernel's first dispatch in the step as built
    for (size_t i = 0; i < s.step.code.size();) {
      const size_t n = group_size(s.step.code, i);
      const std::vector<GeneratedKernel> cur_group(s.step.code.begin() + long(i),
                                                   s.step.code.begin() + long(i + n));
      const GeneratedKernel& cur = cur_group.back();
      for (size_t j = 0; j + 1 < n; ++j) {
        TuneKernel pk;
        pk.dispatch = before + j;
        pk.label = cur_group[j].label;
        pk.archetype = archetype_name(cur_group[j].arch);
        pk.old_variant = cur.tuned.to_string();
        pk.note = "a first pass of its kernel (f16 copy, attention's parts): timed with the next row";
        r.kernels.push_back(pk);
      }
      TuneKernel tk;
      tk.dispatch = before + n - 1;
      tk.label = cur.label;
      tk.archetype = archetype_name(cur.arch);
      tk.old_variant = tk.new_variant = cur.tuned.to_string();
      size_t now = n;  // the kernel's dispatches after this search
      auto finish = [&](const std::string& note) {
        tk.note = note;
        tk.new_variant = s.step.code[i].tuned.to_string();
        for (size_t j = r.kernels.size() - (n - 1); j < r.kernels.size(); ++j)
          r.kernels[j].new_variant = tk.new_variant;
        if (tk.new_variant != tk.old_variant) ++r.changed;
        r.kernels.push_back(tk);
        before += n;
        i += now;
      };
      if (!tunable(cur.arch)) {
        finish("not tunable");
        continue;
      }
      if (!selected(o, cur.arch)) {
        finish("not selected");
        continue;
      }
      // A winner already known (from disk, or an equal kernel earlier in this step) is applied without
      // timing.
      const TuneCacheEntry* known = nullptr;
      if (auto it = found.find(cur.base_hash); it != found.end())
        known = &it->second;
      else if (auto jt = cached.find(cur.base_hash); jt != cached.end())
        known = &jt->second;
      if (known) {
        if (known->variant != cur.tuned) {
          try {
            now = adopt(i, n, regenerate(cur, known->variant));
          } catch (const Error& e) {
            finish(std::string("known winner ") + known->variant.to_string() + " failed: " + e.what());
            continue;
          }
        }
        finish(found.count(cur.base_hash) ? "same kernel as an earlier dispatch" : "cached");
        continue;
      }
      if (o.time_budget_s > 0 && elapsed() > o.time_budget_s) {
        finish("time budget");
        continue;
      }

      std::vector<KernelVariant> cands{cur.tuned};
      for (const KernelVariant& v :
           tune_candidates(s.step.graph, s.step.kernels, cur.kernel, caps, s.step.codegen))
        if (std::find(cands.begin(), cands.end(), v) == cands.end()) cands.push_back(v);
      if (o.max_candidates > 0 && cands.size() > size_t(o.max_candidates))
        cands.resize(size_t(o.max_candidates));

      std::map<uint64_t, double> timed;  // by content hash: explicit spellings of one kernel are timed once
      double best_ns = 0;
      std::vector<GeneratedKernel> best = cur_group;
      for (size_t c = 0; c < cands.size(); ++c) {
        std::vector<GeneratedKernel> gk;
        std::vector<runtime::KernelId> id;
        try {
          gk = c == 0 ? cur_group : regenerate(cur, cands[c]);
          if (timed.count(group_hash(gk))) continue;
          for (const GeneratedKernel& k : gk) id.push_back(kernel_id(k));
        } catch (const Error&) {
          continue;  // this variant cannot run this kernel on this device (or in this plan)
        }
        const double ns = time_group(s, gk, id, o);
        timed[group_hash(gk)] = ns;
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
      if (group_hash(best) != group_hash(cur_group)) now = adopt(i, n, best);
      const KernelVariant won = s.step.code[i].tuned;
      const double old_us = tk.old_us, new_us = tk.new_us;
      finish("");
      found[cur.base_hash] = {won, cur.label, archetype_name(cur.arch), old_us, new_us};
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
