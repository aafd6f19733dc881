// A fresh directory under the system temp dir, removed with everything in it on destruction.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>

namespace qlm::testing {

class TempDir {
 public:
  explicit TempDir(std::string_view prefix = "qlm-test");
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path operator/(std::string_view name) const { return path_ / name; }
  // Writes `bytes` to path()/name (creating parent directories) and returns the full path.
  std::filesystem::path write(std::string_view name, std::string_view bytes) const;

 private:
  std::filesystem::path path_;
};

}  // namespace qlm::testing
