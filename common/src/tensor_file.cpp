// The tensor file's reader and writer (format in common/tensor_file.hpp). Integers are decoded
// byte by byte, so they are right on any host; float data is copied as a block and byte-swapped
// only on a big-endian host.
#include "common/tensor_file.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

namespace gpu100 {
namespace {

constexpr char kMagic[8] = {'G', '1', '0', '0', 'T', 'N', 'S', '1'};
constexpr uint32_t kDtypeFloat32 = 1;

[[noreturn]] void fail(const std::string& path, const std::string& problem) {
  throw TensorFileError(path + ": " + problem);
}

std::string errno_text() {
  return errno != 0 ? std::strerror(errno) : "unknown error";
}

bool host_little_endian() {
  const uint16_t one = 1;
  unsigned char first = 0;
  std::memcpy(&first, &one, 1);
  return first == 1;
}

void swap_bytes(std::vector<float>& v) {
  for (float& f : v) {
    unsigned char b[4];
    std::memcpy(b, &f, 4);
    std::swap(b[0], b[3]);
    std::swap(b[1], b[2]);
    std::memcpy(&f, b, 4);
  }
}

bool printable(char c) {
  return c >= 0x20 && c <= 0x7e;
}

// The bytes as text for a message: printable ASCII as it is, anything else as \xNN.
std::string escaped(const char* p, size_t n) {
  std::string s;
  for (size_t i = 0; i < n; ++i) {
    if (printable(p[i])) {
      s += p[i];
    } else {
      char hex[8];
      std::snprintf(hex, sizeof hex, "\\x%02x", unsigned(static_cast<unsigned char>(p[i])));
      s += hex;
    }
  }
  return s;
}

bool printable_name(const std::string& name) {
  return std::all_of(name.begin(), name.end(), [](char c) { return printable(c); });
}

// Reads the file front to back and knows how many bytes are left, so every size is checked
// against the file before anything is allocated for it.
class Reader {
 public:
  explicit Reader(const std::string& path) : path_(path) {
    std::error_code ec;
    if (std::filesystem::is_directory(path, ec)) fail(path, "cannot open (it is a directory)");
    errno = 0;
    in_.open(path, std::ios::binary);
    if (!in_) fail(path, "cannot open (" + errno_text() + ")");
    in_.seekg(0, std::ios::end);
    const std::streamoff size = in_.tellg();
    in_.seekg(0, std::ios::beg);
    if (!in_ || size < 0) fail(path, "cannot read its size");
    left_ = uint64_t(size);
  }
  [[noreturn]] void fail_here(const std::string& problem) const { fail(path_, problem); }
  uint64_t left() const { return left_; }
  // Throws "truncated in <where>: N bytes of <what> expected, K present" unless n bytes are left.
  void need(uint64_t n, const std::string& where, const char* what) const {
    if (n <= left_) return;
    fail_here("truncated in " + where + ": " + std::to_string(n) + " bytes of " + what +
              " expected, " + std::to_string(left_) + " present");
  }
  void bytes(void* dst, uint64_t n, const std::string& where, const char* what) {
    need(n, where, what);
    if (n > 0 && !in_.read(static_cast<char*>(dst), std::streamsize(n))) {
      fail_here("read error in " + where + " (" + errno_text() + ")");
    }
    left_ -= n;
  }
  uint32_t u32(const std::string& where, const char* what) {
    unsigned char b[4];
    bytes(b, 4, where, what);
    return uint32_t(b[0]) | uint32_t(b[1]) << 8 | uint32_t(b[2]) << 16 | uint32_t(b[3]) << 24;
  }

 private:
  std::string path_;
  std::ifstream in_;
  uint64_t left_ = 0;
};

int64_t decode_i64(const unsigned char* b) {
  uint64_t u = 0;
  for (int i = 7; i >= 0; --i) u = u << 8 | b[i];
  return static_cast<int64_t>(u);
}

// The dims of tensor `at` (already named in `where`); each >= 1 and their product < 2^40.
std::vector<int64_t> read_shape(Reader& r, const std::string& at, const std::string& where) {
  const uint32_t ndim = r.u32(where, "ndim");
  if (ndim < 1 || ndim > kTensorFileMaxDims) {
    r.fail_here(at + " has ndim " + std::to_string(ndim) + " (1..8)");
  }
  unsigned char raw[8 * kTensorFileMaxDims];
  r.bytes(raw, 8 * uint64_t(ndim), where, "dims");
  std::vector<int64_t> shape(ndim);
  for (uint32_t d = 0; d < ndim; ++d) {
    shape[d] = decode_i64(raw + 8 * d);
    if (shape[d] < 1) {
      r.fail_here(at + " has dim " + std::to_string(d) + " = " + std::to_string(shape[d]) +
                  " (each must be >= 1)");
    }
  }
  int64_t numel = 1;
  for (int64_t d : shape) {
    if (numel > kTensorFileMaxNumel / d) {  // numel * d > the limit, tested without overflow
      r.fail_here(at + " has too many elements: shape " + shape_string(shape) +
                  " (at most 2^40 - 1)");
    }
    numel *= d;
  }
  return shape;
}

Tensor read_tensor(Reader& r, uint32_t index) {
  Tensor t;
  const std::string at = "tensor " + std::to_string(index);
  const uint32_t len = r.u32(at, "name length");
  if (len < 1 || len > kTensorFileMaxName) {
    r.fail_here(at + " has a name length of " + std::to_string(len) + " (1..255)");
  }
  r.need(len, at, "name");
  t.name.resize(len);
  r.bytes(&t.name[0], len, at, "name");
  if (!printable_name(t.name)) {
    r.fail_here(at + " has a non-printable name '" + escaped(t.name.data(), len) + "'");
  }
  const std::string where = at + " ('" + t.name + "')";
  const std::string named = at + " '" + t.name + "'";
  const uint32_t dtype = r.u32(where, "dtype");
  if (dtype != kDtypeFloat32) {
    r.fail_here(named + " has dtype " + std::to_string(dtype) + " (only 1 = float32 is read)");
  }
  t.shape = read_shape(r, named, where);
  const uint64_t bytes = uint64_t(t.numel()) * sizeof(float);
  r.need(bytes, where, "data");  // before the allocation: the file must hold the data
  t.data.resize(size_t(t.numel()));
  r.bytes(t.data.data(), bytes, where, "data");
  if (!host_little_endian()) swap_bytes(t.data);
  return t;
}

void put_u32(std::string& s, uint32_t v) {
  for (int i = 0; i < 4; ++i) s += char((v >> (8 * i)) & 0xff);
}

void put_i64(std::string& s, int64_t v) {
  const uint64_t u = static_cast<uint64_t>(v);
  for (int i = 0; i < 8; ++i) s += char((u >> (8 * i)) & 0xff);
}

// Refuses what the reader would refuse, before the file is created.
void check_for_write(const std::string& path, const std::vector<Tensor>& tensors) {
  if (tensors.empty() || tensors.size() > kTensorFileMaxCount) {
    fail(path, "cannot write " + std::to_string(tensors.size()) + " tensors (1..100000)");
  }
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    std::string at = "cannot write tensor " + std::to_string(i);
    if (t.name.empty() || t.name.size() > kTensorFileMaxName) {
      fail(path, at + ": a name of " + std::to_string(t.name.size()) + " bytes (1..255)");
    }
    if (!printable_name(t.name)) {
      fail(path, at + ": a non-printable name '" + escaped(t.name.data(), t.name.size()) + "'");
    }
    at += " '" + t.name + "': shape " + shape_string(t.shape);
    if (t.shape.empty() || t.shape.size() > kTensorFileMaxDims) fail(path, at + " (ndim 1..8)");
    int64_t numel = 1;
    for (int64_t d : t.shape) {
      if (d < 1) fail(path, at + " has a dim < 1");
      if (numel > kTensorFileMaxNumel / d) fail(path, at + " has 2^40 or more elements");
      numel *= d;
    }
    if (uint64_t(numel) != t.data.size()) {
      fail(path, at + " holds " + std::to_string(numel) + " values, the data " +
                     std::to_string(t.data.size()));
    }
  }
}

void write_data(std::ofstream& out, const std::vector<float>& data) {
  if (host_little_endian()) {
    out.write(reinterpret_cast<const char*>(data.data()), std::streamsize(data.size() * 4));
    return;
  }
  std::vector<float> copy = data;
  swap_bytes(copy);
  out.write(reinterpret_cast<const char*>(copy.data()), std::streamsize(copy.size() * 4));
}

}  // namespace

int64_t Tensor::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string shape_string(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

std::vector<Tensor> read_tensor_file(const std::string& path) {
  Reader r(path);
  char magic[8];
  r.bytes(magic, 8, "the header", "magic");
  if (std::memcmp(magic, kMagic, 8) != 0) {
    r.fail_here("not a tensor file (magic '" + escaped(magic, 8) + "', expected 'G100TNS1')");
  }
  const uint32_t count = r.u32("the header", "count");
  if (count == 0) r.fail_here("holds no tensors (count 0)");
  if (count > kTensorFileMaxCount) {
    r.fail_here("count " + std::to_string(count) + " is more than 100000");
  }
  std::vector<Tensor> tensors;
  for (uint32_t i = 0; i < count; ++i) tensors.push_back(read_tensor(r, i));
  if (r.left() != 0) {
    r.fail_here(std::to_string(r.left()) + " trailing bytes after the last tensor (tensor " +
                std::to_string(count - 1) + ")");
  }
  return tensors;
}

void write_tensor_file(const std::string& path, const std::vector<Tensor>& tensors) {
  check_for_write(path, tensors);
  errno = 0;
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) fail(path, "cannot create (" + errno_text() + ")");
  std::string head(kMagic, sizeof kMagic);
  put_u32(head, uint32_t(tensors.size()));
  out.write(head.data(), std::streamsize(head.size()));
  for (const Tensor& t : tensors) {
    std::string h;
    put_u32(h, uint32_t(t.name.size()));
    h += t.name;
    put_u32(h, kDtypeFloat32);
    put_u32(h, uint32_t(t.shape.size()));
    for (int64_t d : t.shape) put_i64(h, d);
    out.write(h.data(), std::streamsize(h.size()));
    write_data(out, t.data);
  }
  out.close();
  if (!out) fail(path, "write failed (" + errno_text() + ")");
}

const Tensor& find_tensor(const std::vector<Tensor>& tensors, const std::string& name,
                          const std::string& path) {
  for (const Tensor& t : tensors) {
    if (t.name == name) return t;
  }
  std::string held;
  for (size_t i = 0; i < tensors.size() && i < 5; ++i) {
    held += (i ? ", '" : "'") + tensors[i].name + "'";
  }
  if (tensors.size() > 5) held += ", ...";
  fail(path, "no tensor '" + name + "' (it holds " + held + ")");
}

}  // namespace gpu100
