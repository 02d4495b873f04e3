// CPU tests of the tensor file (common/tensor_file.hpp): an exact round trip, and every kind of
// corrupted file refused with one line that names the file and the problem. The corrupted files
// are written byte by byte here, so the tests also pin the format down.
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include "common/catch.hpp"
#include "common/random.hpp"
#include "common/temp_dir.hpp"
#include "common/tensor_file.hpp"

namespace fs = std::filesystem;
using gpu100::Tensor;
using gpu100::TensorFileError;

namespace {

// Little-endian bytes, built by hand to make files the writer would refuse to make.
struct Bytes {
  std::string s;
  Bytes& u32(uint32_t v) {
    for (int i = 0; i < 4; ++i) s += char((v >> (8 * i)) & 0xff);
    return *this;
  }
  Bytes& i64(int64_t v) {
    for (int i = 0; i < 8; ++i) s += char((uint64_t(v) >> (8 * i)) & 0xff);
    return *this;
  }
  Bytes& text(const std::string& t) {
    s += t;
    return *this;
  }
  Bytes& floats(size_t n) {
    s.append(4 * n, '\0');
    return *this;
  }
};

// The magic and the count, then a tensor's header up to its data.
Bytes file_head(uint32_t count) {
  return Bytes().text("G100TNS1").u32(count);
}
Bytes& tensor_head(Bytes& b, const std::string& name, uint32_t dtype,
                   const std::vector<int64_t>& dims) {
  b.u32(uint32_t(name.size())).text(name).u32(dtype).u32(uint32_t(dims.size()));
  for (int64_t d : dims) b.i64(d);
  return b;
}

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), std::streamsize(bytes.size()));
}

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// The reader's message for `path`, checked to be one line that starts with the file's name.
std::string read_error(const std::string& path) {
  try {
    gpu100::read_tensor_file(path);
  } catch (const TensorFileError& e) {
    const std::string msg = e.what();
    CHECK(msg.rfind(path + ": ", 0) == 0);
    CHECK(msg.find('\n') == std::string::npos);
    return msg;
  }
  return "(read without an error)";
}

std::string bytes_error(const gpu100::TempDir& tmp, const std::string& bytes) {
  const std::string path = tmp.file("bad.g100");
  write_bytes(path, bytes);
  return read_error(path);
}

std::string write_error(const std::string& path, const std::vector<Tensor>& tensors) {
  try {
    gpu100::write_tensor_file(path, tensors);
  } catch (const TensorFileError& e) {
    return e.what();
  }
  return "(written without an error)";
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// Three tensors: 1 + 6 + 2 floats, names of 1, 4 and 2 bytes.
std::vector<Tensor> small_tensors() {
  return {{"a", {1}, {1.5f}},
          {"conv", {2, 3}, gpu100::random_vector<float>(6, 11)},
          {"fc", {1, 2}, {-2.0f, 0.25f}}};
}

}  // namespace

TEST_CASE("tensor_file: round trip keeps names, shapes and values exactly", "[cpu]") {
  gpu100::TempDir tmp("gpu100_tensor_file");
  std::vector<Tensor> ts = small_tensors();
  std::string long_name;
  for (int i = 0; i < 255; ++i) long_name += char(0x20 + i % 95);  // every printable byte
  ts.push_back({long_name, {1, 1, 1, 1, 1, 1, 1, 7}, gpu100::random_vector<float>(7, 12)});
  ts.push_back({"odd.shape", {3, 1, 5, 7}, gpu100::random_vector<float>(105, 13, -1e30, 1e30)});
  const float inf = std::numeric_limits<float>::infinity();
  ts.push_back({"special",
                {6},
                {-0.0f, inf, -inf, std::numeric_limits<float>::quiet_NaN(),
                 std::numeric_limits<float>::denorm_min(), std::numeric_limits<float>::max()}});
  const std::string path = tmp.file("round.g100");
  gpu100::write_tensor_file(path, ts);
  const std::vector<Tensor> got = gpu100::read_tensor_file(path);
  REQUIRE(got.size() == ts.size());
  for (size_t i = 0; i < ts.size(); ++i) {
    CHECK(got[i].name == ts[i].name);
    CHECK(got[i].shape == ts[i].shape);
    CHECK(got[i].numel() == int64_t(ts[i].data.size()));
    CHECK(same_bits(got[i].data, ts[i].data));  // bit for bit: -0, NaN and denormals included
  }
  // The exact size: magic, count, and per tensor the header and 4 bytes a value.
  uint64_t size = 12;
  for (const Tensor& t : ts) size += 12 + t.name.size() + 8 * t.shape.size() + 4 * t.data.size();
  CHECK(fs::file_size(path) == size);
  CHECK(gpu100::find_tensor(got, "fc", path).data[1] == 0.25f);
}

TEST_CASE("tensor_file: every truncated prefix is refused as truncated", "[cpu]") {
  gpu100::TempDir tmp("gpu100_tensor_file");
  const std::string good = tmp.file("good.g100");
  gpu100::write_tensor_file(good, small_tensors());
  const std::string bytes = read_bytes(good);
  REQUIRE(bytes.size() == 12 + (12 + 1 + 8 + 4) + (12 + 4 + 16 + 24) + (12 + 2 + 16 + 8));
  for (size_t len = 0; len < bytes.size(); ++len) {
    INFO("file cut to " << len << " bytes");
    CHECK(bytes_error(tmp, bytes.substr(0, len)).find(": truncated in ") != std::string::npos);
  }
  const std::string path = tmp.file("bad.g100");
  auto cut = [&](size_t len) { return bytes_error(tmp, bytes.substr(0, len)); };
  CHECK(cut(0) == path + ": truncated in the header: 8 bytes of magic expected, 0 present");
  CHECK(cut(5) == path + ": truncated in the header: 8 bytes of magic expected, 5 present");
  CHECK(cut(10) == path + ": truncated in the header: 4 bytes of count expected, 2 present");
  CHECK(cut(14) == path + ": truncated in tensor 0: 4 bytes of name length expected, 2 present");
  // Tensor 1 starts at byte 37: name "conv" at 41..44, dtype 45..48, ndim 49..52, dims 53..68,
  // data 69..92.
  CHECK(cut(43) == path + ": truncated in tensor 1: 4 bytes of name expected, 2 present");
  CHECK(cut(51) == path + ": truncated in tensor 1 ('conv'): 4 bytes of ndim expected, 2 present");
  CHECK(cut(59) == path + ": truncated in tensor 1 ('conv'): 16 bytes of dims expected, 6 present");
  CHECK(cut(78) == path + ": truncated in tensor 1 ('conv'): 24 bytes of data expected, 9 present");
  CHECK(cut(bytes.size() - 1) ==
        path + ": truncated in tensor 2 ('fc'): 8 bytes of data expected, 7 present");
}

TEST_CASE("tensor_file: a corrupted header or tensor is refused naming the problem", "[cpu]") {
  gpu100::TempDir tmp("gpu100_tensor_file");
  auto err = [&](const Bytes& b) { return bytes_error(tmp, b.s); };
  auto one = [&](const std::string& name, uint32_t dtype, const std::vector<int64_t>& dims) {
    Bytes b = file_head(1);
    return tensor_head(b, name, dtype, dims);
  };
  CHECK_THAT(err(Bytes().text("PK\x03\x04zzzz").u32(1)),
             Catch::Matchers::EndsWith(": not a tensor file (magic 'PK\\x03\\x04zzzz', expected "
                                       "'G100TNS1')"));
  CHECK_THAT(err(file_head(0)), Catch::Matchers::EndsWith(": holds no tensors (count 0)"));
  CHECK_THAT(err(file_head(100001)),
             Catch::Matchers::EndsWith(": count 100001 is more than 100000"));
  CHECK_THAT(err(file_head(1).u32(0)),
             Catch::Matchers::EndsWith(": tensor 0 has a name length of 0 (1..255)"));
  CHECK_THAT(err(file_head(1).u32(256).text(std::string(256, 'a'))),
             Catch::Matchers::EndsWith(": tensor 0 has a name length of 256 (1..255)"));
  CHECK_THAT(err(one(std::string("ab\0c", 4), 1, {1}).floats(1)),
             Catch::Matchers::EndsWith(": tensor 0 has a non-printable name 'ab\\x00c'"));
  CHECK_THAT(err(one("w", 2, {1}).floats(1)),
             Catch::Matchers::EndsWith(": tensor 0 'w' has dtype 2 (only 1 = float32 is read)"));
  CHECK_THAT(err(one("w", 1, {})), Catch::Matchers::EndsWith(": tensor 0 'w' has ndim 0 (1..8)"));
  CHECK_THAT(err(one("w", 1, std::vector<int64_t>(9, 1)).floats(1)),
             Catch::Matchers::EndsWith(": tensor 0 'w' has ndim 9 (1..8)"));
  CHECK_THAT(err(one("w", 1, {4, 0, 2})),
             Catch::Matchers::EndsWith(": tensor 0 'w' has dim 1 = 0 (each must be >= 1)"));
  CHECK_THAT(err(one("w", 1, {-3})),
             Catch::Matchers::EndsWith(": tensor 0 'w' has dim 0 = -3 (each must be >= 1)"));
  CHECK_THAT(err(one("w", 1, {int64_t(1) << 20, int64_t(1) << 20})),
             Catch::Matchers::EndsWith(": tensor 0 'w' has too many elements: shape [1048576, "
                                       "1048576] (at most 2^40 - 1)"));
  CHECK(err(one("w", 1, {INT64_MAX, INT64_MAX})).find("has too many elements") !=
        std::string::npos);
  CHECK_THAT(err(one("w", 1, {2}).floats(2).text("x")),
             Catch::Matchers::EndsWith(": 1 trailing bytes after the last tensor (tensor 0)"));
  // The first problem is the one reported: tensor 0 is fine, tensor 1 has dtype 7.
  Bytes two = file_head(2);
  tensor_head(two, "ok", 1, {1}).floats(1);
  CHECK_THAT(err(tensor_head(two, "rgb.bn1.weight", 7, {64}).floats(64)),
             Catch::Matchers::EndsWith(": tensor 1 'rgb.bn1.weight' has dtype 7 (only 1 = float32 "
                                       "is read)"));
}

TEST_CASE("tensor_file: sizes larger than the file are refused before allocating", "[cpu]") {
  gpu100::TempDir tmp("gpu100_tensor_file");
  Bytes b = file_head(1);
  tensor_head(b, "huge", 1, {int64_t(1) << 20, int64_t(1) << 19}).floats(2);  // 2^39 values
  CHECK_THAT(bytes_error(tmp, b.s),
             Catch::Matchers::EndsWith(": truncated in tensor 0 ('huge'): 2199023255552 bytes of "
                                       "data expected, 8 present"));
  CHECK_THAT(bytes_error(tmp, file_head(1).u32(255).text("abc").s),
             Catch::Matchers::EndsWith(": truncated in tensor 0: 255 bytes of name expected, 3 "
                                       "present"));
  CHECK_THAT(
      bytes_error(tmp, file_head(100000).s),
      Catch::Matchers::EndsWith(": truncated in tensor 0: 4 bytes of name length expected, 0 "
                                "present"));
}

TEST_CASE("tensor_file: unreadable files, unwritable paths and invalid tensors", "[cpu]") {
  gpu100::TempDir tmp("gpu100_tensor_file");
  const std::string missing = tmp.file("missing.g100");
  CHECK(read_error(missing) == missing + ": cannot open (No such file or directory)");
  CHECK(read_error(tmp.dir.string()) == tmp.dir.string() + ": cannot open (it is a directory)");
  const std::string nowhere = tmp.file("no_such_dir/out.g100");
  CHECK_THAT(write_error(nowhere, small_tensors()),
             Catch::Matchers::StartsWith(nowhere + ": cannot create ("));

  // Invalid tensors are refused before the file is created.
  const std::string path = tmp.file("never.g100");
  auto with = [&](Tensor t) { return write_error(path, {small_tensors()[0], t}); };
  CHECK(with({"w", {2, 3}, {1, 2, 3}}) ==
        path + ": cannot write tensor 1 'w': shape [2, 3] holds 6 values, the data 3");
  CHECK(with({"", {1}, {1}}) == path + ": cannot write tensor 1: a name of 0 bytes (1..255)");
  CHECK(with({"a\nb", {1}, {1}}) ==
        path + ": cannot write tensor 1: a non-printable name 'a\\x0ab'");
  CHECK(with({"w", {}, {1}}) == path + ": cannot write tensor 1 'w': shape [] (ndim 1..8)");
  CHECK(with({"w", {2, 0}, {}}) ==
        path + ": cannot write tensor 1 'w': shape [2, 0] has a dim < 1");
  CHECK(write_error(path, {}) == path + ": cannot write 0 tensors (1..100000)");
  CHECK_FALSE(fs::exists(path));

  const std::vector<Tensor> ts = small_tensors();
  CHECK_THROWS_AS(gpu100::find_tensor(ts, "rgb", path), TensorFileError);
  CHECK_THROWS_WITH(gpu100::find_tensor(ts, "rgb", path),
                    path + ": no tensor 'rgb' (it holds 'a', 'conv', 'fc')");
}
