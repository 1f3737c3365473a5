#pragma once
// Batches of a TensorDataset in a seeded order, prepared ahead on a background thread.
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "meganeura/data/dataset.hpp"

namespace meganeura {

struct LoaderOptions {
  int64_t batch_size = 32;
  bool shuffle = true;
  uint64_t seed = 0;
  bool drop_last = true;  // a compiled session has fixed shapes: a short last batch cannot be trained on
  int prefetch = 2;       // batches prepared ahead; 0 gathers on the caller's thread
  // Data-parallel training: `world` processes share one epoch order (same seed); global batch i is rows
  // [i·batch_size·world, (i+1)·batch_size·world) of it and rank r trains on its r-th slice of batch_size
  // rows, so the ranks' batches together are the batch one process with batch_size·world would see. Needs
  // drop_last.
  int rank = 0;
  int world = 1;
};

class DataLoader {
 public:
  DataLoader(std::shared_ptr<const TensorDataset> data, LoaderOptions options);
  ~DataLoader();
  DataLoader(const DataLoader&) = delete;
  DataLoader& operator=(const DataLoader&) = delete;

  // Starts an epoch; its order depends only on (seed, epoch). Without an argument, the epoch after the last.
  void start_epoch(std::optional<uint64_t> epoch = std::nullopt);
  // The next batch of the current epoch, or nullopt at its end. Starts epoch 0 when none was started.
  std::optional<Batch> next();

  int64_t batches_per_epoch() const;
  int64_t batch_size() const { return options_.batch_size; }
  const LoaderOptions& options() const { return options_; }
  const TensorDataset& dataset() const { return *data_; }
  uint64_t epoch() const { return epoch_; }
  // Row order of an epoch (identity when shuffle is off), before sharding by rank.
  std::vector<int64_t> epoch_order(uint64_t epoch) const;

 private:
  void stop_producer();
  void produce();
  size_t batch_end(size_t begin) const;

  std::shared_ptr<const TensorDataset> data_;
  LoaderOptions options_;
  uint64_t epoch_ = 0;
  bool started_ = false;
  std::vector<int64_t> order_;
  size_t cursor_ = 0;    // next row for synchronous gathering
  int64_t emitted_ = 0;  // batches handed out this epoch

  std::thread worker_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Batch> queue_;
  bool producer_done_ = false;
  bool stop_ = false;
  std::exception_ptr error_;
};

}  // namespace meganeura
