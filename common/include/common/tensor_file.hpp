#pragma once
// The project's tensor file (".g100"): one format for weights, network inputs and outputs.
//
// Little-endian, no padding:
//   magic "G100TNS1" (8 bytes), count uint32 (1..100000), then per tensor:
//   name_len uint32 (1..255), name (printable ASCII), dtype uint32 (1 = float32, the only one),
//   ndim uint32 (1..8), dims int64[ndim] (each >= 1, product < 2^40), data float32[product].
// The file ends exactly after the last tensor.
//
// The reader checks every size against the bytes left in the file before it allocates, so a
// corrupted or hostile file costs at most its own size in memory. Every problem is a
// TensorFileError with one line naming the file and the first problem found.
#include <cstdint>
#include <string>
#include <vector>

#include "common/errors.hpp"

namespace gpu100 {

struct Tensor {
  std::string name;
  std::vector<int64_t> shape;
  std::vector<float> data;  // row-major, shape's product values
  int64_t numel() const;    // the product of shape (1 for an empty shape)
};

// A file that cannot be read or written, or does not hold what was asked of it: exit status 2.
class TensorFileError : public UsageError {
 public:
  using UsageError::UsageError;
};

constexpr uint32_t kTensorFileMaxCount = 100000;
constexpr uint32_t kTensorFileMaxName = 255;
constexpr uint32_t kTensorFileMaxDims = 8;
constexpr int64_t kTensorFileMaxNumel = (int64_t(1) << 40) - 1;

// Every tensor of the file, in file order (names are not checked for duplicates here).
std::vector<Tensor> read_tensor_file(const std::string& path);

// Writes `tensors` (1..100000 of them, each with a valid name and shape, and data of the shape's
// size); checks them all before the file is created.
void write_tensor_file(const std::string& path, const std::vector<Tensor>& tensors);

// The tensor called `name`; throws naming `path` and the names the file holds when it is absent.
const Tensor& find_tensor(const std::vector<Tensor>& tensors, const std::string& name,
                          const std::string& path);

// "[64, 3, 7, 7]", the form every shape takes in the messages.
std::string shape_string(const std::vector<int64_t>& shape);

}  // namespace gpu100
