// The distributed step (SessionConfig::distributed, docs/distributed.md): the recorded updating step cut into
// segments at gradient-bucket boundaries. Backward produces gradients in reverse layer order; as soon as the
// GPU finishes the segment that completes a bucket, the host starts that bucket's all-reduce while the GPU
// runs the next segments. The last segment copies the averaged gradients back and runs the updates, so an
// update waits only for the reductions, never for a host round trip per parameter.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <set>
#include <span>
#include <thread>

#include "meganeura/session/pipeline.hpp"
#include "meganeura/session/session.hpp"
#include "meganeura/session/session_impl.hpp"

namespace meganeura {
namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// FNV-1a over the bucket layout: ranks that compiled different graphs must not average unrelated bytes.
uint64_t layout_hash(const SessionImpl& s) {
  uint64_t h = 1469598103934665603ull;
  auto mix = [&](uint64_t v) {
    for (int i = 0; i < 8; ++i) h = (h ^ ((v >> (8 * i)) & 0xff)) * 1099511628211ull;
  };
  for (const SessionImpl::Bucket& b : s.buckets) {
    mix(b.bytes);
    for (const SessionImpl::GradientCopy& g : b.grads) mix(g.bytes);
    for (char c : b.names) mix(uint8_t(c));
  }
  return h;
}

}  // namespace

std::string DistributedStats::to_text() const {
  char line[512];
  const double n = double(std::max<uint64_t>(steps, 1));
  std::snprintf(
      line, sizeof line,
      "distributed: %llu steps, %zu buckets of %.2f MiB in all; per step %.2f ms in step(), backward %.2f "
      "ms, all-reduce in flight %.2f ms, exposed %.2f ms (%.0f%% hidden behind backward)",
      static_cast<unsigned long long>(steps), buckets, double(bytes) / (1 << 20), 1e3 * step_s / n,
      1e3 * backward_s / n, 1e3 * reduce_s / n, 1e3 * exposed_s / n, 100.0 * hidden_fraction());
  return line;
}

void setup_distributed(SessionImpl& s) {
  const dist::DistributedConfig& d = s.config.distributed;
  if (!d.enabled() || !s.step.plan.hyper || s.step.param_grads.empty()) return;
  const std::string fn = "[build] distributed training (" + std::to_string(d.size()) + " ranks): ";
  if (s.config.optimizer.grad_accumulation > 1)
    throw ConfigError(
        fn + "expected grad_accumulation 1 (the ranks' batches already make the global batch), got " +
        std::to_string(s.config.optimizer.grad_accumulation));
  if (d.bucket_bytes < 4)
    throw ConfigError(fn + "expected bucket_bytes >= 4, got " + std::to_string(d.bucket_bytes));
  const CompiledStep& st = s.step;
  const std::vector<size_t> ks = step_kernels(st, true);
  // Position in the step after which each gradient is complete: after the last dispatch of its producer.
  std::map<size_t, size_t> end_of_kernel;  // kernel index -> dispatches up to and including its last one
  for (size_t i = 0; i < ks.size(); ++i) end_of_kernel[st.code[ks[i]].kernel] = i + 1;
  struct Grad {
    size_t end;
    NodeId storage, param;
  };
  std::vector<Grad> grads;
  std::set<NodeId> seen;  // equal gradients of two parameters share one value: reduce it once
  for (auto [p, gr] : st.param_grads) {
    const NodeId storage = st.kernels.storage_of(gr);
    if (!seen.insert(storage).second) continue;
    if (!st.plan.slot_of.count(storage))
      throw SessionError(fn + "expected the gradient of '" + st.graph.node(p).prov.name +
                         "' stored, got none");
    if (s.stored_dtype(gr) != DType::F32)
      throw SessionError(fn + "expected f32 gradients, got " + dtype_name(s.stored_dtype(gr)) + " for '" +
                         st.graph.node(p).prov.name + "'");
    auto prod = st.kernels.producer.find(storage);
    const size_t end = prod == st.kernels.producer.end() ? 0 : end_of_kernel.at(prod->second);
    grads.push_back({end, storage, p});
  }
  std::stable_sort(grads.begin(), grads.end(), [](const Grad& a, const Grad& b) { return a.end < b.end; });
  uint64_t offset = 0;
  for (const Grad& g : grads) {
    if (s.buckets.empty() || s.buckets.back().bytes >= d.bucket_bytes) {
      s.buckets.emplace_back();
      s.buckets.back().offset = offset;
    }
    SessionImpl::Bucket& b = s.buckets.back();
    const uint64_t bytes = s.stored_bytes(g.storage);
    b.grads.push_back({s.buffer_of(g.storage), offset, bytes});
    b.bytes += bytes;
    b.end = std::max(b.end, g.end);
    b.names += (b.names.empty() ? "" : ", ") + st.graph.node(g.param).prov.name;
    offset += bytes;
  }
  // Buckets complete in order; a later one cannot end before an earlier one.
  for (size_t i = 1; i < s.buckets.size(); ++i)
    s.buckets[i].end = std::max(s.buckets[i].end, s.buckets[i - 1].end);
  s.bucket_host = s.device->alloc_host(std::max<uint64_t>(offset, 4));
  s.owned.push_back(s.bucket_host);
  s.bucket_map = reinterpret_cast<float*>(s.device->host_pointer(s.bucket_host));
  if (d.order == dist::ReduceOrder::Ranked) s.gather_scratch.resize(size_t(offset / 4) * size_t(d.size()));
  s.dist_stats.buckets = s.buckets.size();
  s.dist_stats.bytes = offset;
  // Every rank must have compiled the same step: compare the layout with rank 0's.
  uint64_t h = layout_hash(s), root = h;
  d.comm->broadcast(&root, sizeof root, 0, "the gradient layout");
  const double mismatches = d.comm->sum(std::vector<double>{root != h ? 1.0 : 0.0}, "the layout check")[0];
  if (mismatches > 0)
    throw DistributedError(
        fn + "expected every rank to compile the same model (gradient layout of rank 0), got " +
        std::to_string(int(mismatches)) + " rank(s) with another" +
        (root != h ? " (this one, rank " + std::to_string(d.rank()) + ")" : std::string()));
}

void record_segments(SessionImpl& s, SessionImpl::Frame& f) {
  const std::vector<size_t>& ks = s.timed_kernels;  // the updating step's dispatches (session.cpp's record())
  const std::vector<bool>& barrier_before = s.barrier_before;
  f.segments.clear();
  size_t at = 0;
  for (size_t b = 0; b <= s.buckets.size(); ++b) {
    std::unique_ptr<runtime::CommandList> list = s.device->record(0);
    if (b == 0)
      copy_in(s, f, *list);
    else
      list->barrier();  // orders it after the previous segment (and the host's writes before submission)
    const bool last = b == s.buckets.size();
    if (last) {
      for (const SessionImpl::Bucket& bk : s.buckets)
        for (const SessionImpl::GradientCopy& g : bk.grads)
          list->copy(runtime::slice(s.bucket_host, g.offset, g.bytes), g.grad, g.bytes);
      list->barrier();
    }
    const size_t end = last ? ks.size() : s.buckets[b].end;
    for (size_t first = at; at < end; ++at) {
      if (barrier_before[at] && at != first) list->barrier();
      record_dispatch(s, *list, ks[at]);
    }
    list->barrier();
    if (last)
      copy_out(s, f, *list);
    else
      for (const SessionImpl::GradientCopy& g : s.buckets[b].grads)
        list->copy(g.grad, runtime::slice(s.bucket_host, g.offset, g.bytes), g.bytes);
    list->finish();  // makes the copies visible to the host
    f.segments.push_back(std::move(list));
  }
}

void SessionImpl::submit_distributed() {
  dist::Communicator& comm = *config.distributed.comm;
  const dist::ReduceOrder order = config.distributed.order;
  const size_t next = size_t(last_step % frames.size());
  Frame& f = frames[next];
  wait_and_refresh_staging(f);
  const double t0 = now_s();
  std::vector<uint64_t> ids;
  for (size_t b = 0; b < buckets.size(); ++b) ids.push_back(device->submit(*f.segments[b]));
  const float scale = 1.0f / float(comm.size());
  std::vector<dist::Communicator::Request> requests;
  double reduce_from = 0, backward_done = 0;
  auto all_done = [&] {
    bool done = true;
    for (dist::Communicator::Request r : requests) done = comm.test(r) && done;
    return done;
  };
  // In-flight time of the reductions as a union of intervals: [first start, all done), minus idle gaps.
  double reduce_s = 0;
  auto account = [&](double now, bool busy_before) {
    if (busy_before) reduce_s += now - reduce_from;
    reduce_from = now;
  };
  for (size_t b = 0; b < buckets.size(); ++b) {
    const double deadline = comm.deadline_from_now();
    for (int spins = 0; !device->finished(ids[b]); ++spins) {
      const bool busy = !all_done();
      account(now_s(), busy);
      if (now_s() > deadline)
        throw DistributedError("[Session::step] expected the GPU to finish gradient bucket " +
                               std::to_string(b) + " within " + std::to_string(int(comm.timeout_s())) +
                               " s, got no completion");
      if (spins > 200) std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
    account(now_s(), !all_done());
    const Bucket& bk = buckets[b];
    const size_t first = size_t(bk.offset / 4), count = size_t(bk.bytes / 4);
    std::span<float> scratch;
    if (order == dist::ReduceOrder::Ranked)
      scratch =
          std::span<float>(gather_scratch).subspan(first * size_t(comm.size()), count * size_t(comm.size()));
    requests.push_back(comm.start_sum(std::span<float>(bucket_map + first, count), scratch, scale, order,
                                      "gradient bucket " + std::to_string(b) + " (" + bk.names + ")"));
  }
  backward_done = now_s();
  reduce_from = backward_done;
  for (dist::Communicator::Request r : requests) comm.wait(r);
  const double reduced = now_s();
  reduce_s += reduced - reduce_from;
  comm.release_all();
  f.submission = device->submit(*f.segments.back());
  f.step = ++last_step;
  last_update_frame = next;
  dist_stats.steps += 1;
  dist_stats.step_s += now_s() - t0;
  dist_stats.backward_s += backward_done - t0;
  dist_stats.reduce_s += reduce_s;
  dist_stats.exposed_s += reduced - backward_done;
}

void Session::broadcast_parameters(int root) {
  SessionImpl& s = *impl_;
  const dist::DistributedConfig& d = s.config.distributed;
  if (!d.enabled()) return;
  s.device->wait();
  for (NodeId p : s.step.graph.parameters()) {
    if (!s.step.plan.slot_of.count(s.kernels_storage(p))) continue;
    std::vector<std::byte> raw(s.stored_bytes(p));
    if (raw.empty()) continue;
    if (d.rank() == root) s.device->download(s.buffer_of(p), raw.data(), raw.size());
    d.comm->broadcast(raw.data(), raw.size(), root, s.step.graph.node(p).prov.name.c_str());
    if (d.rank() != root) s.device->upload(s.buffer_of(p), raw.data(), raw.size());
  }
}

DistributedStats Session::distributed_stats() const { return impl_->dist_stats; }

}  // namespace meganeura
