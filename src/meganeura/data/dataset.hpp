#pragma once
// In-memory data sets of named columns, and the MNIST / Fashion-MNIST loaders.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "meganeura/ir/graph.hpp"

namespace meganeura {

// A host tensor: f32 or i32 values of a logical shape. Only the vector matching dtype is used.
struct DataTensor {
  DType dtype = DType::F32;
  Shape shape;
  std::vector<float> f32;
  std::vector<int32_t> i32;
  int64_t count() const;
};

// A batch: one tensor per name, the batch axis first. `rows` may be below the loader's batch size for the
// last batch of an epoch when drop_last is off.
struct Batch {
  std::map<std::string, DataTensor> tensors;
  int64_t rows = 0;
  int64_t index = 0;                                    // batch number within its epoch
  const DataTensor& at(const std::string& name) const;  // DataError naming the missing column
};

// Columns of equal length; example i of every column forms row i of the set.
class TensorDataset {
 public:
  void add_f32(const std::string& name, Shape example_shape, std::vector<float> values);
  void add_i32(const std::string& name, Shape example_shape, std::vector<int32_t> values);
  int64_t size() const { return size_; }
  const std::map<std::string, DataTensor>& columns() const { return columns_; }
  // Rows `order[begin..end)` gathered into one batch.
  Batch gather(const std::vector<int64_t>& order, size_t begin, size_t end) const;

 private:
  void check_column(const std::string& name, const Shape& example_shape, size_t values);
  std::map<std::string, DataTensor> columns_;  // shape = example shape (no batch axis)
  int64_t size_ = -1;
};

// An image classification set as read from IDX: images scaled to [0, 1], labels as class indices.
struct ImageSet {
  int64_t count = 0, rows = 0, cols = 0, classes = 10;
  std::vector<float> images;    // count * rows * cols
  std::vector<int32_t> labels;  // count, each in [0, classes)
};

enum class Split : uint8_t { Train, Test };
inline constexpr const char* kDefaultMnistDir = "/usr/share/datasets/fashion-mnist";

// Reads <dir>/{train,t10k}-{images-idx3,labels-idx1}-ubyte[.gz]; DataError names a missing or bad file.
ImageSet load_mnist(const std::string& dir, Split split);

enum class LabelEncoding : uint8_t { OneHot, Index };
// Columns `image_name` [rows*cols] f32 and `label_name`: [classes] f32 one-hot, or [] i32 class index.
TensorDataset to_dataset(const ImageSet& set, LabelEncoding labels, const std::string& image_name = "x",
                         const std::string& label_name = "labels");

}  // namespace meganeura
