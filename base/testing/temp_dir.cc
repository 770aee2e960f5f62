#include "base/testing/temp_dir.h"

#include <errno.h>
#include <stdlib.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <system_error>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace troupe::test {
namespace {

namespace fs = std::filesystem;

std::string Root() {
  for (const char* var : {"TEST_TMPDIR", "TMPDIR"}) {
    const char* value = std::getenv(var);
    if (value != nullptr && value[0] != '\0') return value;
  }
  return "/tmp";
}

}  // namespace

TempDir::TempDir(absl::string_view name) {
  std::string pattern = absl::StrCat(Root(), "/", name, ".XXXXXX");
  std::vector<char> buffer(pattern.begin(), pattern.end());
  buffer.push_back('\0');
  if (::mkdtemp(buffer.data()) == nullptr) {
    ADD_FAILURE() << "cannot create a temporary directory " << pattern << ": "
                  << std::strerror(errno);
    return;
  }
  std::error_code ec;
  const fs::path absolute = fs::absolute(buffer.data(), ec);
  path_ = ec ? std::string(buffer.data()) : absolute.string();
}

TempDir::~TempDir() {
  if (path_.empty()) return;
  std::error_code ec;
  fs::remove_all(path_, ec);
}

TempDir::TempDir(TempDir&& other) noexcept : path_(std::exchange(other.path_, std::string())) {}

TempDir& TempDir::operator=(TempDir&& other) noexcept {
  if (this != &other) {
    TempDir old(std::move(*this));  // removes what this held
    path_ = std::exchange(other.path_, std::string());
  }
  return *this;
}

std::string TempDir::Path(absl::string_view relative) const {
  return absl::StrCat(path_, "/", relative);
}

bool WriteFile(const std::string& path, absl::string_view contents) {
  std::error_code ec;
  const fs::path parent = fs::path(path).parent_path();
  if (!parent.empty()) fs::create_directories(parent, ec);
  if (ec) {
    ADD_FAILURE() << "cannot create the directory " << parent.string() << ": " << ec.message();
    return false;
  }
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(contents.data(), static_cast<std::streamsize>(contents.size()));
  out.close();
  if (!out) {
    ADD_FAILURE() << "cannot write " << path << ": " << std::strerror(errno);
    return false;
  }
  return true;
}

std::string ReadFile(const std::string& path) {
  std::error_code ec;
  if (fs::is_directory(path, ec)) {
    ADD_FAILURE() << "cannot read " << path << ": is a directory";
    return "";
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    ADD_FAILURE() << "cannot read " << path << ": " << std::strerror(errno);
    return "";
  }
  std::ostringstream contents;
  contents << in.rdbuf();
  if (in.bad()) {
    ADD_FAILURE() << "cannot read " << path << ": " << std::strerror(errno);
    return "";
  }
  return contents.str();
}

}  // namespace troupe::test
