#pragma once
// One process of a data-parallel MPI job (docs/distributed.md). Open MPI's libmpi.so.40 is loaded with dlopen
// on first use, so the library and its binaries do not depend on it: a program that never asks for MPI runs
// where no MPI is installed. Every collective is non-blocking underneath and polled against a deadline, so a
// rank that died or hangs turns into a DistributedError on the others instead of a hang.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace meganeura::dist {

// How gradient buckets are summed across ranks.
enum class ReduceOrder : uint8_t {
  // Each rank gathers every rank's bucket (MPI_Iallgather) and sums them on the host in rank order 0, 1, ...:
  // bit-identical on every rank and from run to run, whatever MPI's algorithm. Moves (N-1)/N·S·N bytes a rank
  // instead of all-reduce's 2(N-1)/N·S: the same at N = 2, N/2 times more beyond.
  Ranked,
  // MPI_Iallreduce with MPI_SUM: MPI's own algorithm and order (Open MPI's are fixed for a given world size
  // and
  // message size, but the standard promises nothing).
  Mpi,
};
const char* reduce_order_name(ReduceOrder o);

class Communicator {
 public:
  // Joins the MPI job this process was started in (mpirun sets it up; a process started alone is a job of
  // one). Calls MPI_Init_thread once per process. DistributedError when libmpi.so.40 cannot be loaded.
  static std::shared_ptr<Communicator> world();
  ~Communicator();  // the last one finalizes MPI, or aborts the job after a failed collective
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  int local_rank() const { return local_rank_; }  // among the ranks on this host (MPI_COMM_TYPE_SHARED)
  int local_size() const { return local_size_; }
  // Seconds any one collective may take before the rank gives up (DistributedError): long enough for the
  // slowest rank's step, short enough that a dead rank is noticed. Default 300.
  double timeout_s() const { return timeout_s_; }
  void set_timeout(double seconds);

  void barrier(const char* what);
  void broadcast(void* data, size_t bytes, int root, const char* what);
  std::vector<double> sum(std::span<const double> values, const char* what);  // every rank gets the sums
  double mean(double value, const char* what);

  // A non-blocking sum of `data` over ranks, written back into `data` on every rank (scaled by `scale`).
  // `scratch` holds size()·data.size() floats for ReduceOrder::Ranked. Progress happens in test()/wait().
  using Request = size_t;
  Request start_sum(std::span<float> data, std::span<float> scratch, float scale, ReduceOrder order,
                    std::string what);
  bool test(Request r);  // done (and scaled)? never blocks
  void wait(Request r);  // until done, DistributedError after timeout_s()
  void poll();           // lets MPI progress every pending request
  void release_all();    // forgets finished requests (ids start again at 0)
  double deadline_from_now() const;

  // For tests of the dead-rank path: ends this process without MPI_Finalize.
  [[noreturn]] static void die(int code);

 private:
  Communicator() = default;
  struct Pending;
  void fail(const std::string& message);
  void wait_request(void* request, const std::string& what);
  void finish(Pending& p);

  int rank_ = 0, size_ = 1, local_rank_ = 0, local_size_ = 1;
  double timeout_s_ = 300;
  bool failed_ = false;
  void* local_comm_ = nullptr;
  std::vector<std::unique_ptr<Pending>> pending_;
};

// SessionConfig::distributed. With a communicator of more than one rank a training session averages each
// step's gradients over the ranks before its update (docs/distributed.md, "The step").
struct DistributedConfig {
  std::shared_ptr<Communicator> comm;  // null: one process (MEGANEURA_DISTRIBUTED=1: Communicator::world())
  ReduceOrder order = ReduceOrder::Ranked;  // MEGANEURA_REDUCE_ORDER=ranked|mpi
  uint64_t bucket_bytes = 25ull << 20;      // gradient bytes per all-reduce (MEGANEURA_BUCKET_BYTES)
  bool enabled() const { return comm && comm->size() > 1; }
  int rank() const { return comm ? comm->rank() : 0; }
  int size() const { return comm ? comm->size() : 1; }
};

}  // namespace meganeura::dist
