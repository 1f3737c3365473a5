#include "meganeura/distributed/mpi.hpp"

#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdio>
#include <mutex>
#include <thread>
#include <type_traits>

// Open MPI's header for its types and constants only: every function is called through a pointer resolved
// with dlsym, and the predefined handles (MPI_COMM_WORLD, MPI_FLOAT, ...) are the addresses of the library's
// globals, looked up by name too. Linking libmpi would make every binary depend on it.
#define OMPI_SKIP_MPICXX 1
#include <mpi.h>

#include "meganeura/core/error.hpp"

namespace meganeura::dist {

const char* reduce_order_name(ReduceOrder o) { return o == ReduceOrder::Ranked ? "ranked" : "mpi"; }

namespace {

struct MpiApi {
  decltype(&::MPI_Initialized) initialized;
  decltype(&::MPI_Finalized) finalized;
  decltype(&::MPI_Init_thread) init_thread;
  decltype(&::MPI_Finalize) finalize;
  decltype(&::MPI_Abort) abort;
  decltype(&::MPI_Comm_rank) comm_rank;
  decltype(&::MPI_Comm_size) comm_size;
  decltype(&::MPI_Comm_split_type) comm_split_type;
  decltype(&::MPI_Comm_free) comm_free;
  decltype(&::MPI_Comm_set_errhandler) comm_set_errhandler;
  decltype(&::MPI_Error_string) error_string;
  decltype(&::MPI_Ibarrier) ibarrier;
  decltype(&::MPI_Ibcast) ibcast;
  decltype(&::MPI_Iallreduce) iallreduce;
  decltype(&::MPI_Iallgather) iallgather;
  decltype(&::MPI_Test) test;
  decltype(&::MPI_Cancel) cancel;
  MPI_Comm comm_world;
  MPI_Datatype type_float, type_double, type_byte;
  MPI_Op op_sum;
  MPI_Info info_null;
  MPI_Errhandler errors_return;
};

const MpiApi& mpi() {
  static MpiApi api{};
  static std::string failure;
  static std::once_flag once;
  std::call_once(once, [] {
    // RTLD_GLOBAL: Open MPI's own plugins (mca_*.so), which it dlopens, resolve libmpi's symbols globally.
    void* lib = dlopen("libmpi.so.40", RTLD_NOW | RTLD_GLOBAL);
    if (lib == nullptr) {
      const char* why = dlerror();
      failure = std::string(
                    "[dist::Communicator::world] expected Open MPI (libmpi.so.40) for distributed training, "
                    "got: ") +
                (why ? why : "dlopen failed") + ". Install it: apt-get install openmpi-bin";
      return;
    }
    auto sym = [&](const char* name) {
      void* p = dlsym(lib, name);
      if (p == nullptr && failure.empty())
        failure = std::string("[dist::Communicator::world] expected libmpi.so.40 to export ") + name +
                  ", got none (not Open MPI 4?)";
      return p;
    };
    auto fn = [&](auto& slot, const char* name) {
      slot = reinterpret_cast<std::decay_t<decltype(slot)>>(sym(name));
    };
    fn(api.initialized, "MPI_Initialized");
    fn(api.finalized, "MPI_Finalized");
    fn(api.init_thread, "MPI_Init_thread");
    fn(api.finalize, "MPI_Finalize");
    fn(api.abort, "MPI_Abort");
    fn(api.comm_rank, "MPI_Comm_rank");
    fn(api.comm_size, "MPI_Comm_size");
    fn(api.comm_split_type, "MPI_Comm_split_type");
    fn(api.comm_free, "MPI_Comm_free");
    fn(api.comm_set_errhandler, "MPI_Comm_set_errhandler");
    fn(api.error_string, "MPI_Error_string");
    fn(api.ibarrier, "MPI_Ibarrier");
    fn(api.ibcast, "MPI_Ibcast");
    fn(api.iallreduce, "MPI_Iallreduce");
    fn(api.iallgather, "MPI_Iallgather");
    fn(api.test, "MPI_Test");
    fn(api.cancel, "MPI_Cancel");
    api.comm_world = static_cast<MPI_Comm>(sym("ompi_mpi_comm_world"));
    api.type_float = static_cast<MPI_Datatype>(sym("ompi_mpi_float"));
    api.type_double = static_cast<MPI_Datatype>(sym("ompi_mpi_double"));
    api.type_byte = static_cast<MPI_Datatype>(sym("ompi_mpi_byte"));
    api.op_sum = static_cast<MPI_Op>(sym("ompi_mpi_op_sum"));
    api.info_null = static_cast<MPI_Info>(sym("ompi_mpi_info_null"));
    api.errors_return = static_cast<MPI_Errhandler>(sym("ompi_mpi_errors_return"));
  });
  if (!failure.empty()) throw DistributedError(failure);
  return api;
}

std::string mpi_error(int code) {
  char text[MPI_MAX_ERROR_STRING] = {};
  int len = 0;
  mpi().error_string(code, text, &len);
  return std::string(text, size_t(std::max(0, len)));
}

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

std::mutex g_mutex;
std::weak_ptr<Communicator> g_world;
bool g_finalized = false;

}  // namespace

struct Communicator::Pending {
  MPI_Request request = nullptr;  // MPI_REQUEST_NULL is a libmpi global: `active` says whether one is pending
  bool active = false;
  std::span<float> data, scratch;
  float scale = 1;
  ReduceOrder order = ReduceOrder::Ranked;
  std::string what;
  bool done = false;
};

std::shared_ptr<Communicator> Communicator::world() {
  std::lock_guard<std::mutex> lock(g_mutex);
  if (auto w = g_world.lock()) return w;
  if (g_finalized)
    throw DistributedError(
        "[dist::Communicator::world] expected MPI to be usable, got it finalized when the last "
        "Communicator went (MPI cannot start twice in a process: keep one alive)");
  const MpiApi& m = mpi();
  int init = 0;
  m.initialized(&init);
  if (!init) {
    int provided = 0;
    if (int rc = m.init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided); rc != MPI_SUCCESS)
      throw DistributedError("[dist::Communicator::world] expected MPI_Init_thread to succeed, got " +
                             mpi_error(rc));
  }
  std::shared_ptr<Communicator> c(new Communicator());
  m.comm_set_errhandler(m.comm_world, m.errors_return);  // errors come back as codes, reported with the rank
  m.comm_rank(m.comm_world, &c->rank_);
  m.comm_size(m.comm_world, &c->size_);
  MPI_Comm local = nullptr;
  if (int rc = m.comm_split_type(m.comm_world, MPI_COMM_TYPE_SHARED, c->rank_, m.info_null, &local);
      rc != MPI_SUCCESS)
    throw DistributedError(
        "[dist::Communicator::world] expected MPI_Comm_split_type to find this host's ranks, got " +
        mpi_error(rc));
  m.comm_rank(local, &c->local_rank_);
  m.comm_size(local, &c->local_size_);
  c->local_comm_ = local;
  g_world = c;
  return c;
}

Communicator::~Communicator() {
  std::lock_guard<std::mutex> lock(g_mutex);
  const MpiApi& m = mpi();
  int fin = 0;
  m.finalized(&fin);
  if (fin) return;
  if (failed_) {
    // A collective timed out: a peer is gone or stuck, so MPI_Finalize (collective) could hang. Abort ends
    // the whole job; the failure was printed already.
    std::fflush(stderr);
    m.abort(m.comm_world, 3);
  }
  MPI_Comm local = static_cast<MPI_Comm>(local_comm_);
  if (local != nullptr) m.comm_free(&local);
  m.finalize();
  g_finalized = true;
}

void Communicator::set_timeout(double seconds) {
  if (!(seconds > 0))
    throw ConfigError("[dist::Communicator::set_timeout] expected seconds > 0, got " +
                      std::to_string(seconds));
  timeout_s_ = seconds;
}

double Communicator::deadline_from_now() const { return now_s() + timeout_s_; }

void Communicator::fail(const std::string& message) {
  failed_ = true;
  // Printed here too: the process may be torn down by the job before the caller's handler prints anything.
  std::fprintf(stderr, "%s\n", message.c_str());
  std::fflush(stderr);
  throw DistributedError(message);
}

void Communicator::wait_request(void* request, const std::string& what) {
  MPI_Request& r = *static_cast<MPI_Request*>(request);
  const double deadline = deadline_from_now();
  for (int spins = 0;; ++spins) {
    int flag = 0;
    if (int rc = mpi().test(&r, &flag, MPI_STATUS_IGNORE); rc != MPI_SUCCESS)
      fail("[dist] rank " + std::to_string(rank_) + ": expected " + what +
           " to complete, got MPI error: " + mpi_error(rc));
    if (flag) return;
    if (now_s() > deadline)
      fail("[dist] rank " + std::to_string(rank_) + " of " + std::to_string(size_) +
           ": expected every rank in " + what + " within " + std::to_string(int(timeout_s_)) +
           " s (MEGANEURA_DIST_TIMEOUT), got no answer: a rank died or hangs; aborting the job");
    // Spin briefly (a collective between busy GPUs completes in microseconds), then yield the core.
    if (spins > 1000) std::this_thread::sleep_for(std::chrono::microseconds(spins > 100000 ? 1000 : 20));
  }
}

void Communicator::barrier(const char* what) {
  if (size_ == 1) return;
  MPI_Request r = nullptr;
  if (int rc = mpi().ibarrier(mpi().comm_world, &r); rc != MPI_SUCCESS)
    fail(std::string("[dist] expected MPI_Ibarrier (") + what + ") to start, got " + mpi_error(rc));
  wait_request(&r, std::string("the barrier ") + what);
}

void Communicator::broadcast(void* data, size_t bytes, int root, const char* what) {
  if (size_ == 1) return;
  if (root < 0 || root >= size_)
    throw DistributedError("[dist::Communicator::broadcast] expected a root rank below " +
                           std::to_string(size_) + ", got " + std::to_string(root));
  auto* p = static_cast<std::byte*>(data);
  for (size_t at = 0; at < bytes;) {  // counts are ints
    const size_t n = std::min<size_t>(bytes - at, size_t(INT_MAX));
    MPI_Request r = nullptr;
    if (int rc = mpi().ibcast(p + at, int(n), mpi().type_byte, root, mpi().comm_world, &r); rc != MPI_SUCCESS)
      fail(std::string("[dist] expected MPI_Ibcast of ") + what + " to start, got " + mpi_error(rc));
    wait_request(&r, std::string("the broadcast of ") + what);
    at += n;
  }
}

std::vector<double> Communicator::sum(std::span<const double> values, const char* what) {
  std::vector<double> out(values.begin(), values.end());
  if (size_ == 1 || out.empty()) return out;
  // Ranked: every rank's values gathered and summed in rank order, so every rank sees the same sums.
  std::vector<double> all(out.size() * size_t(size_));
  MPI_Request r = nullptr;
  if (int rc = mpi().iallgather(out.data(), int(out.size()), mpi().type_double, all.data(), int(out.size()),
                                mpi().type_double, mpi().comm_world, &r);
      rc != MPI_SUCCESS)
    fail(std::string("[dist] expected MPI_Iallgather of ") + what + " to start, got " + mpi_error(rc));
  wait_request(&r, std::string("the sum of ") + what);
  for (size_t i = 0; i < out.size(); ++i) {
    double s = all[i];
    for (size_t k = 1; k < size_t(size_); ++k) s += all[k * out.size() + i];
    out[i] = s;
  }
  return out;
}

double Communicator::mean(double value, const char* what) {
  return sum(std::span<const double>(&value, 1), what)[0] / double(size_);
}

Communicator::Request Communicator::start_sum(std::span<float> data, std::span<float> scratch, float scale,
                                              ReduceOrder order, std::string what) {
  if (data.size() > size_t(INT_MAX))
    throw DistributedError("[dist::Communicator::start_sum] expected at most 2^31-1 values in " + what +
                           ", got " + std::to_string(data.size()));
  if (order == ReduceOrder::Ranked && scratch.size() < data.size() * size_t(size_))
    throw DistributedError("[dist::Communicator::start_sum] expected scratch of " +
                           std::to_string(data.size() * size_t(size_)) + " floats for " + what + ", got " +
                           std::to_string(scratch.size()));
  auto p = std::make_unique<Pending>();
  p->data = data;
  p->scratch = scratch;
  p->scale = scale;
  p->order = order;
  p->what = std::move(what);
  if (size_ > 1) {
    const MpiApi& m = mpi();
    const int n = int(data.size());
    const int rc = order == ReduceOrder::Ranked ? m.iallgather(data.data(), n, m.type_float, scratch.data(),
                                                               n, m.type_float, m.comm_world, &p->request)
                                                : m.iallreduce(MPI_IN_PLACE, data.data(), n, m.type_float,
                                                               m.op_sum, m.comm_world, &p->request);
    if (rc != MPI_SUCCESS) fail("[dist] expected the sum of " + p->what + " to start, got " + mpi_error(rc));
    p->active = true;
  }
  pending_.push_back(std::move(p));
  return pending_.size() - 1;
}

void Communicator::finish(Pending& p) {
  const size_t n = p.data.size();
  if (p.order == ReduceOrder::Ranked && size_ > 1) {
    const float* all = p.scratch.data();
    for (size_t i = 0; i < n; ++i) {
      float s = all[i];
      for (size_t k = 1; k < size_t(size_); ++k) s += all[k * n + i];
      p.data[i] = s * p.scale;
    }
  } else if (p.scale != 1.0f) {
    for (float& v : p.data) v *= p.scale;
  }
  p.done = true;
}

bool Communicator::test(Request r) {
  Pending& p = *pending_.at(r);
  if (p.done) return true;
  if (p.active) {
    int flag = 0;
    if (int rc = mpi().test(&p.request, &flag, MPI_STATUS_IGNORE); rc != MPI_SUCCESS)
      fail("[dist] rank " + std::to_string(rank_) + ": expected the sum of " + p.what + " to complete, got " +
           mpi_error(rc));
    if (!flag) return false;
  }
  finish(p);
  return true;
}

void Communicator::poll() {
  for (size_t i = 0; i < pending_.size(); ++i) test(i);
}

void Communicator::release_all() {
  for (const auto& p : pending_)
    if (!p->done)
      throw DistributedError("[dist::Communicator::release_all] expected every sum finished, got " + p->what +
                             " still pending");
  pending_.clear();
}

void Communicator::wait(Request r) {
  Pending& p = *pending_.at(r);
  if (p.done) return;
  if (p.active) wait_request(&p.request, "the sum of " + p.what);
  finish(p);
}

void Communicator::die(int code) {
  std::fflush(nullptr);
  _exit(code);
}

}  // namespace meganeura::dist
