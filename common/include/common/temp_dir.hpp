#pragma once
// gpu100::TempDir: a fresh folder under the system's temporary directory for a test's files,
// removed with everything in it when the object goes out of scope.
#include <chrono>
#include <filesystem>
#include <string>
#include <system_error>

namespace gpu100 {

struct TempDir {
  std::filesystem::path dir;
  explicit TempDir(const std::string& prefix) {
    const auto tick = std::chrono::steady_clock::now().time_since_epoch().count();
    dir = std::filesystem::temp_directory_path() / (prefix + "_" + std::to_string(tick));
    std::filesystem::create_directories(dir);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  std::string file(const std::string& name) const { return (dir / name).string(); }
};

}  // namespace gpu100
