// IDX reading of the real Fashion-MNIST files, rejection of damaged files, and the loader's ordering.
#include <gtest/gtest.h>
#include <zlib.h>

#include <filesystem>
#include <fstream>
#include <set>

#include "meganeura/core/error.hpp"
#include "meganeura/data/dataset.hpp"
#include "meganeura/data/idx.hpp"
#include "meganeura/data/loader.hpp"
#include "paths.hpp"

namespace fs = std::filesystem;
using namespace meganeura;

namespace {

// Looked up on first use: a missing data set fails the tests that need it, not the whole binary.
const std::string& mnist_dir() {
  static const std::string dir = meganeura::test::dataset_dir("fashion-mnist").string();
  return dir;
}

fs::path temp_dir(const std::string& name) {
  fs::path d = fs::temp_directory_path() / ("meganeura-test-data-" + name + "-" + std::to_string(::getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

std::vector<uint8_t> file_bytes(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

void write_bytes(const fs::path& p, const std::vector<uint8_t>& b) {
  std::ofstream f(p, std::ios::binary);
  f.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
}

// A tiny IDX u8 file: header by hand, as the format specifies (big-endian dims).
std::vector<uint8_t> idx_u8(std::vector<uint32_t> dims, std::vector<uint8_t> payload) {
  std::vector<uint8_t> b = {0, 0, 0x08, static_cast<uint8_t>(dims.size())};
  for (uint32_t d : dims) {
    b.push_back(static_cast<uint8_t>(d >> 24));
    b.push_back(static_cast<uint8_t>(d >> 16));
    b.push_back(static_cast<uint8_t>(d >> 8));
    b.push_back(static_cast<uint8_t>(d));
  }
  b.insert(b.end(), payload.begin(), payload.end());
  return b;
}

template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const DataError& e) {
    return e.what();
  }
  return "";
}

std::shared_ptr<TensorDataset> counting_set(int n) {
  auto ds = std::make_shared<TensorDataset>();
  std::vector<float> x(static_cast<size_t>(n) * 2);
  std::vector<int32_t> y(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) {
    x[2 * i] = static_cast<float>(i);
    x[2 * i + 1] = static_cast<float>(-i);
    y[i] = i;
  }
  ds->add_f32("x", {2}, x);
  ds->add_i32("y", {}, y);
  return ds;
}

std::vector<int32_t> drain_ids(DataLoader& loader) {
  std::vector<int32_t> ids;
  while (auto b = loader.next()) {
    const DataTensor& y = b->at("y");
    const DataTensor& x = b->at("x");
    EXPECT_EQ(x.shape, (Shape{b->rows, 2}));
    for (int64_t r = 0; r < b->rows; ++r) {
      EXPECT_EQ(x.f32[2 * r], static_cast<float>(y.i32[r]));  // columns stay aligned row by row
      ids.push_back(y.i32[r]);
    }
  }
  return ids;
}

}  // namespace

TEST(Idx, ReadsRealFashionMnistTrainAndTest) {
  const ImageSet train = load_mnist(mnist_dir(), Split::Train);
  EXPECT_EQ(train.count, 60000);
  EXPECT_EQ(train.rows, 28);
  EXPECT_EQ(train.cols, 28);
  ASSERT_EQ(train.images.size(), 60000u * 784u);
  const ImageSet test = load_mnist(mnist_dir(), Split::Test);
  EXPECT_EQ(test.count, 10000);
  // Fashion-MNIST is balanced: every class 6000 times in train, 1000 in test.
  std::vector<int> per_class(10, 0);
  for (int32_t l : train.labels) {
    ASSERT_GE(l, 0);
    ASSERT_LT(l, 10);
    ++per_class[l];
  }
  for (int c = 0; c < 10; ++c) EXPECT_EQ(per_class[c], 6000) << "class " << c;
  float lo = 1, hi = 0;
  for (float v : test.images) {
    lo = std::min(lo, v);
    hi = std::max(hi, v);
  }
  EXPECT_EQ(lo, 0.0f);
  EXPECT_EQ(hi, 1.0f);
}

TEST(Idx, LabelsFileHeaderDecodes) {
  const IdxArray a = read_idx(mnist_dir() + "/t10k-labels-idx1-ubyte.gz");
  EXPECT_EQ(a.type, IdxType::U8);
  EXPECT_EQ(a.dims, (std::vector<int64_t>{10000}));
  EXPECT_EQ(a.raw.size(), 10000u);
}

TEST(Idx, ParsesHandMadeFileAndRejectsTruncation) {
  const IdxArray a = parse_idx(idx_u8({2, 3}, {1, 2, 3, 4, 5, 6}), "mem");
  EXPECT_EQ(a.dims, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(a.to_float(), (std::vector<float>{1, 2, 3, 4, 5, 6}));
  const std::string e = error_of([] { parse_idx(idx_u8({2, 3}, {1, 2, 3, 4, 5}), "short.idx"); });
  EXPECT_NE(e.find("short.idx"), std::string::npos) << e;
  EXPECT_NE(e.find("truncated"), std::string::npos) << e;
  EXPECT_NE(error_of([] {
              parse_idx({0x12, 0x34, 0x56, 0x78, 0, 0, 0, 1}, "bad-magic");
            }).find("bad-magic"),
            std::string::npos);
}

TEST(Idx, MissingFileIsNamed) {
  const fs::path d = temp_dir("missing");
  const std::string e = error_of([&] { load_mnist(d.string(), Split::Test); });
  EXPECT_NE(e.find((d / "t10k-images-idx3-ubyte.gz").string()), std::string::npos) << e;
  fs::remove_all(d);
}

TEST(Idx, TruncatedGzipIsRejectedWithTheFileNamed) {
  const fs::path d = temp_dir("truncated");
  std::vector<uint8_t> gz = file_bytes(mnist_dir() + "/t10k-labels-idx1-ubyte.gz");
  ASSERT_GT(gz.size(), 1000u);
  fs::copy_file(mnist_dir() + "/t10k-images-idx3-ubyte.gz", d / "t10k-images-idx3-ubyte.gz");
  gz.resize(gz.size() / 2);
  const fs::path bad = d / "t10k-labels-idx1-ubyte.gz";
  write_bytes(bad, gz);
  const std::string e = error_of([&] { load_mnist(d.string(), Split::Test); });
  EXPECT_NE(e.find(bad.string()), std::string::npos) << e;
  fs::remove_all(d);
}

TEST(Idx, CorruptGzipPayloadIsRejected) {
  const fs::path d = temp_dir("corrupt");
  std::vector<uint8_t> gz = file_bytes(mnist_dir() + "/t10k-labels-idx1-ubyte.gz");
  // Flip bits in the deflate stream; either inflate or the gzip CRC32 must object.
  for (size_t i = gz.size() / 2; i < gz.size() / 2 + 16; ++i) gz[i] ^= 0x5A;
  const fs::path bad = d / "labels.gz";
  write_bytes(bad, gz);
  const std::string e = error_of([&] { read_idx(bad.string()); });
  EXPECT_NE(e.find(bad.string()), std::string::npos) << e;
  fs::remove_all(d);
}

TEST(Idx, UncompressedCopyIsReadToo) {
  const fs::path d = temp_dir("plain");
  write_bytes(d / "t10k-images-idx3-ubyte", idx_u8({2, 1, 2}, {0, 255, 51, 102}));
  write_bytes(d / "t10k-labels-idx1-ubyte", idx_u8({2}, {7, 3}));
  const ImageSet s = load_mnist(d.string(), Split::Test);
  EXPECT_EQ(s.labels, (std::vector<int32_t>{7, 3}));
  EXPECT_FLOAT_EQ(s.images[1], 1.0f);
  EXPECT_FLOAT_EQ(s.images[2], 0.2f);
  // A label outside [0, 10) is a corrupt file.
  write_bytes(d / "t10k-labels-idx1-ubyte", idx_u8({2}, {7, 12}));
  const std::string e = error_of([&] { load_mnist(d.string(), Split::Test); });
  EXPECT_NE(e.find("t10k-labels-idx1-ubyte"), std::string::npos) << e;
  fs::remove_all(d);
}

TEST(Dataset, OneHotAndIndexLabels) {
  ImageSet s;
  s.count = 2;
  s.rows = 1;
  s.cols = 2;
  s.images = {0, 1, 2, 3};
  s.labels = {2, 9};
  const TensorDataset oh = to_dataset(s, LabelEncoding::OneHot);
  const DataTensor& l = oh.columns().at("labels");
  ASSERT_EQ(l.f32.size(), 20u);
  EXPECT_EQ(l.f32[2], 1.0f);
  EXPECT_EQ(l.f32[19], 1.0f);
  float sum = 0;
  for (float v : l.f32) sum += v;
  EXPECT_EQ(sum, 2.0f);
  const TensorDataset ix = to_dataset(s, LabelEncoding::Index);
  EXPECT_EQ(ix.columns().at("labels").i32, (std::vector<int32_t>{2, 9}));
}

TEST(Loader, ShuffleIsDeterministicBySeedAndDiffersByEpoch) {
  auto ds = counting_set(100);
  for (int prefetch : {0, 2}) {
    DataLoader a(ds, {.batch_size = 10, .shuffle = true, .seed = 7, .drop_last = true, .prefetch = prefetch});
    DataLoader b(ds, {.batch_size = 10, .shuffle = true, .seed = 7, .drop_last = true, .prefetch = 0});
    DataLoader c(ds, {.batch_size = 10, .shuffle = true, .seed = 8, .drop_last = true, .prefetch = prefetch});
    a.start_epoch(0);
    b.start_epoch(0);
    c.start_epoch(0);
    const auto ia = drain_ids(a), ib = drain_ids(b), ic = drain_ids(c);
    ASSERT_EQ(ia.size(), 100u);
    EXPECT_EQ(ia, ib);
    EXPECT_NE(ia, ic);
    EXPECT_EQ(std::set<int32_t>(ia.begin(), ia.end()).size(), 100u);  // a permutation
    std::vector<int32_t> identity(100);
    for (int i = 0; i < 100; ++i) identity[i] = i;
    EXPECT_NE(ia, identity);
    a.start_epoch();  // epoch 1
    const auto ia1 = drain_ids(a);
    EXPECT_NE(ia1, ia);
    a.start_epoch(0);  // an epoch's order depends on (seed, epoch) only
    EXPECT_EQ(drain_ids(a), ia);
  }
}

TEST(Loader, DropLastAndShortLastBatch) {
  auto ds = counting_set(25);
  DataLoader drop(ds, {.batch_size = 10, .shuffle = false, .seed = 0, .drop_last = true, .prefetch = 1});
  EXPECT_EQ(drop.batches_per_epoch(), 2);
  const auto ids = drain_ids(drop);
  ASSERT_EQ(ids.size(), 20u);
  EXPECT_EQ(ids.front(), 0);
  EXPECT_EQ(ids.back(), 19);
  DataLoader keep(ds, {.batch_size = 10, .shuffle = false, .seed = 0, .drop_last = false, .prefetch = 1});
  EXPECT_EQ(keep.batches_per_epoch(), 3);
  std::vector<int64_t> rows;
  while (auto b = keep.next()) rows.push_back(b->rows);
  EXPECT_EQ(rows, (std::vector<int64_t>{10, 10, 5}));
  EXPECT_FALSE(keep.next().has_value());
}

TEST(Loader, RestartingMidEpochStopsThePrefetcher) {
  auto ds = counting_set(1000);
  DataLoader l(ds, {.batch_size = 8, .shuffle = true, .seed = 1, .drop_last = true, .prefetch = 3});
  for (int e = 0; e < 20; ++e) {
    l.start_epoch(static_cast<uint64_t>(e));
    ASSERT_TRUE(l.next().has_value());
  }
  EXPECT_NE(error_of([&] { (void)l.next()->at("nope"); }).find("'nope'"), std::string::npos);
}

TEST(Loader, RejectsBadOptions) {
  auto ds = counting_set(5);
  EXPECT_THROW(DataLoader(ds, {.batch_size = 0}), DataError);
  EXPECT_THROW(DataLoader(ds, {.batch_size = 10, .shuffle = false, .seed = 0, .drop_last = true}), DataError);
  TensorDataset bad;
  bad.add_f32("x", {2}, {1, 2, 3, 4});
  EXPECT_THROW(bad.add_i32("y", {}, {1, 2, 3}), DataError);
}
