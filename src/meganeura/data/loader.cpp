#include "meganeura/data/loader.hpp"

#include "meganeura/core/error.hpp"

namespace meganeura {
namespace {

// splitmix64: a fixed, portable generator, so an order depends on the seed and nothing else (std::shuffle
// and the standard distributions differ between library implementations).
uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

}  // namespace

DataLoader::DataLoader(std::shared_ptr<const TensorDataset> data, LoaderOptions options)
    : data_(std::move(data)), options_(options) {
  if (!data_ || data_->size() <= 0)
    throw DataError("[DataLoader] expected a data set with at least one row, got an empty one");
  if (options_.batch_size <= 0)
    throw DataError("[DataLoader] expected batch_size > 0, got " + std::to_string(options_.batch_size));
  if (options_.prefetch < 0)
    throw DataError("[DataLoader] expected prefetch >= 0, got " + std::to_string(options_.prefetch));
  if (options_.world < 1 || options_.rank < 0 || options_.rank >= options_.world)
    throw DataError("[DataLoader] expected 0 <= rank < world, got rank " + std::to_string(options_.rank) +
                    " of world " + std::to_string(options_.world));
  if (options_.world > 1 && !options_.drop_last)
    throw DataError("[DataLoader] expected drop_last with world " + std::to_string(options_.world) +
                    " (every rank needs a full batch each step), got drop_last off");
  const int64_t global = options_.batch_size * options_.world;
  if (options_.drop_last && data_->size() < global)
    throw DataError("[DataLoader] expected at least batch_size=" + std::to_string(options_.batch_size) +
                    (options_.world > 1 ? " x world=" + std::to_string(options_.world) : std::string()) +
                    " rows with drop_last, got " + std::to_string(data_->size()));
}

DataLoader::~DataLoader() { stop_producer(); }

int64_t DataLoader::batches_per_epoch() const {
  const int64_t n = data_->size(), b = options_.batch_size * options_.world;
  return options_.drop_last ? n / b : (n + b - 1) / b;
}

std::vector<int64_t> DataLoader::epoch_order(uint64_t epoch) const {
  const size_t n = static_cast<size_t>(data_->size());
  std::vector<int64_t> order(n);
  for (size_t i = 0; i < n; ++i) order[i] = static_cast<int64_t>(i);
  if (!options_.shuffle) return order;
  uint64_t state = options_.seed ^ (0xD1B54A32D192ED03ull * (epoch + 1));
  for (size_t i = n - 1; i > 0; --i) {
    // Lemire's multiply-shift maps 64 random bits onto [0, i]; its bias is far below 2^-40 here.
    const uint64_t r = splitmix64(state);
    const size_t j = static_cast<size_t>((static_cast<unsigned __int128>(r) * (i + 1)) >> 64);
    std::swap(order[i], order[j]);
  }
  return order;
}

size_t DataLoader::batch_end(size_t begin) const {
  return std::min(order_.size(), begin + static_cast<size_t>(options_.batch_size));
}

void DataLoader::stop_producer() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (worker_.joinable()) worker_.join();
  std::lock_guard<std::mutex> lock(mu_);
  stop_ = false;
  queue_.clear();
  producer_done_ = false;
  error_ = nullptr;
}

void DataLoader::start_epoch(std::optional<uint64_t> epoch) {
  stop_producer();
  epoch_ = epoch ? *epoch : (started_ ? epoch_ + 1 : 0);
  started_ = true;
  order_ = epoch_order(epoch_);
  if (options_.world > 1) {  // this rank's slice of every global batch, in batch order
    const size_t b = size_t(options_.batch_size), w = size_t(options_.world), r = size_t(options_.rank);
    std::vector<int64_t> mine;
    for (size_t g = 0; g < size_t(batches_per_epoch()); ++g)
      mine.insert(mine.end(), order_.begin() + long((g * w + r) * b),
                  order_.begin() + long((g * w + r + 1) * b));
    order_ = std::move(mine);
  }
  cursor_ = 0;
  emitted_ = 0;
  if (options_.prefetch > 0) worker_ = std::thread([this] { produce(); });
}

void DataLoader::produce() {
  try {
    const int64_t total = batches_per_epoch();
    for (int64_t i = 0; i < total; ++i) {
      const size_t begin = static_cast<size_t>(i * options_.batch_size);
      Batch b = data_->gather(order_, begin, batch_end(begin));
      b.index = i;
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stop_ || queue_.size() < static_cast<size_t>(options_.prefetch); });
      if (stop_) return;
      queue_.push_back(std::move(b));
      cv_.notify_all();
    }
  } catch (...) {
    std::lock_guard<std::mutex> lock(mu_);
    error_ = std::current_exception();
  }
  std::lock_guard<std::mutex> lock(mu_);
  producer_done_ = true;
  cv_.notify_all();
}

std::optional<Batch> DataLoader::next() {
  if (!started_) start_epoch(0);
  if (emitted_ >= batches_per_epoch()) return std::nullopt;
  if (options_.prefetch == 0) {
    Batch b = data_->gather(order_, cursor_, batch_end(cursor_));
    b.index = emitted_++;
    cursor_ = batch_end(cursor_);
    return b;
  }
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return !queue_.empty() || producer_done_; });
  if (queue_.empty()) {
    if (error_) std::rethrow_exception(error_);
    return std::nullopt;
  }
  Batch b = std::move(queue_.front());
  queue_.pop_front();
  ++emitted_;
  cv_.notify_all();
  return b;
}

}  // namespace meganeura
