#include "meganeura/data/dataset.hpp"

#include <algorithm>
#include <filesystem>

#include "meganeura/core/error.hpp"
#include "meganeura/data/idx.hpp"

namespace meganeura {
namespace {

int64_t product(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

std::string dims_str(const Shape& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) {
    if (i) out += ", ";
    out += std::to_string(s[i]);
  }
  return out + "]";
}

// The canonical names are gzip files; accept an uncompressed copy when only that exists.
std::string find_file(const std::string& dir, const std::string& stem) {
  namespace fs = std::filesystem;
  const fs::path gz = fs::path(dir) / (stem + ".gz");
  const fs::path plain = fs::path(dir) / stem;
  std::error_code ec;
  if (fs::exists(gz, ec)) return gz.string();
  if (fs::exists(plain, ec)) return plain.string();
  throw DataError("[load_mnist] expected '" + gz.string() + "' (or '" + plain.string() +
                  "'), got no such file; install Debian's dataset-fashion-mnist or pass --data DIR");
}

}  // namespace

int64_t DataTensor::count() const { return product(shape); }

const DataTensor& Batch::at(const std::string& name) const {
  auto it = tensors.find(name);
  if (it == tensors.end()) {
    std::string have;
    for (const auto& [k, v] : tensors) {
      if (!have.empty()) have += ", ";
      have += k;
    }
    throw DataError("[Batch::at] expected a column named '" + name + "', got columns {" + have + "}");
  }
  return it->second;
}

void TensorDataset::check_column(const std::string& name, const Shape& example_shape, size_t values) {
  if (columns_.count(name))
    throw DataError("[TensorDataset] expected a new column name, got '" + name + "' twice");
  const int64_t per = product(example_shape);
  if (per <= 0 || values % static_cast<size_t>(per) != 0)
    throw DataError("[TensorDataset] column '" + name + "': expected a multiple of " + std::to_string(per) +
                    " values for example shape " + dims_str(example_shape) + ", got " +
                    std::to_string(values));
  const int64_t rows = static_cast<int64_t>(values) / per;
  if (size_ >= 0 && rows != size_)
    throw DataError("[TensorDataset] column '" + name + "': expected " + std::to_string(size_) +
                    " rows, got " + std::to_string(rows));
  size_ = rows;
}

void TensorDataset::add_f32(const std::string& name, Shape example_shape, std::vector<float> values) {
  check_column(name, example_shape, values.size());
  DataTensor t{DType::F32, std::move(example_shape), std::move(values), {}};
  columns_.emplace(name, std::move(t));
}

void TensorDataset::add_i32(const std::string& name, Shape example_shape, std::vector<int32_t> values) {
  check_column(name, example_shape, values.size());
  DataTensor t{DType::I32, std::move(example_shape), {}, std::move(values)};
  columns_.emplace(name, std::move(t));
}

Batch TensorDataset::gather(const std::vector<int64_t>& order, size_t begin, size_t end) const {
  Batch b;
  b.rows = static_cast<int64_t>(end - begin);
  for (const auto& [name, col] : columns_) {
    DataTensor t;
    t.dtype = col.dtype;
    t.shape = col.shape;
    t.shape.insert(t.shape.begin(), b.rows);
    const size_t per = static_cast<size_t>(product(col.shape));
    auto copy_rows = [&](const auto& src, auto& dst) {
      dst.resize(per * (end - begin));
      for (size_t r = begin; r < end; ++r) {
        const size_t row = static_cast<size_t>(order[r]);
        std::copy_n(src.begin() + static_cast<std::ptrdiff_t>(row * per), per,
                    dst.begin() + static_cast<std::ptrdiff_t>((r - begin) * per));
      }
    };
    if (col.dtype == DType::I32)
      copy_rows(col.i32, t.i32);
    else
      copy_rows(col.f32, t.f32);
    b.tensors.emplace(name, std::move(t));
  }
  return b;
}

ImageSet load_mnist(const std::string& dir, Split split) {
  const std::string prefix = split == Split::Train ? "train" : "t10k";
  const std::string images_path = find_file(dir, prefix + "-images-idx3-ubyte");
  const std::string labels_path = find_file(dir, prefix + "-labels-idx1-ubyte");
  const IdxArray images = read_idx(images_path);
  const IdxArray labels = read_idx(labels_path);
  if (images.type != IdxType::U8 || images.dims.size() != 3)
    throw DataError("[load_mnist] " + images_path + ": expected u8 images of rank 3, got rank " +
                    std::to_string(images.dims.size()));
  if (labels.type != IdxType::U8 || labels.dims.size() != 1)
    throw DataError("[load_mnist] " + labels_path + ": expected u8 labels of rank 1, got rank " +
                    std::to_string(labels.dims.size()));
  if (images.dims[0] != labels.dims[0])
    throw DataError("[load_mnist] expected as many labels in " + labels_path + " as images in " +
                    images_path + ", got " + std::to_string(labels.dims[0]) + " and " +
                    std::to_string(images.dims[0]));
  ImageSet set;
  set.count = images.dims[0];
  set.rows = images.dims[1];
  set.cols = images.dims[2];
  set.images.resize(images.raw.size());
  for (size_t i = 0; i < images.raw.size(); ++i) set.images[i] = static_cast<float>(images.raw[i]) / 255.0f;
  set.labels.resize(labels.raw.size());
  for (size_t i = 0; i < labels.raw.size(); ++i) {
    if (labels.raw[i] >= set.classes)
      throw DataError("[load_mnist] " + labels_path + ": expected labels in [0, 10), got " +
                      std::to_string(labels.raw[i]) + " at index " + std::to_string(i));
    set.labels[i] = labels.raw[i];
  }
  return set;
}

TensorDataset to_dataset(const ImageSet& set, LabelEncoding labels, const std::string& image_name,
                         const std::string& label_name) {
  TensorDataset ds;
  ds.add_f32(image_name, {set.rows * set.cols}, set.images);
  if (labels == LabelEncoding::Index) {
    ds.add_i32(label_name, {}, set.labels);
  } else {
    std::vector<float> onehot(static_cast<size_t>(set.count * set.classes), 0.0f);
    for (int64_t i = 0; i < set.count; ++i)
      onehot[static_cast<size_t>(i * set.classes + set.labels[i])] = 1.0f;
    ds.add_f32(label_name, {set.classes}, std::move(onehot));
  }
  return ds;
}

}  // namespace meganeura
