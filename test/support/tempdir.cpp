#include "test/support/tempdir.hpp"

#include <dirent.h>
#include <ftw.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <vector>

namespace ctx::test {

namespace {

int remove_entry(const char* p, const struct stat*, int type, struct FTW*) {
  // A test may have left a directory without write permission. Only a
  // directory: chmod(2) follows a symbolic link, and a test tree may hold
  // one to /etc.
  if (type == FTW_DP) ::chmod(p, 0700);
  ::remove(p);
  return 0;
}

void mkdir_p(const std::string& p, unsigned mode) {
  for (std::size_t i = 1; i <= p.size(); ++i) {
    if (i == p.size() || p[i] == '/') {
      std::string part = p.substr(0, i);
      if (::mkdir(part.c_str(), mode) < 0 && errno != EEXIST) throw std::runtime_error("mkdir " + part + " failed");
    }
  }
}

}  // namespace

TempDir::TempDir() {
  const char* base = std::getenv("TMPDIR");
  std::string tmpl = std::string(base != nullptr && *base != '\0' ? base : "/tmp") + "/ctx-test.XXXXXX";
  std::vector<char> buf(tmpl.begin(), tmpl.end());
  buf.push_back('\0');
  if (::mkdtemp(buf.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
  path_ = buf.data();
  ::chmod(path_.c_str(), 0755);
}

TempDir::~TempDir() {
  // Children first (FTW_DEPTH), never through a symlink (FTW_PHYS), never
  // across a mount point (FTW_MOUNT).
  ::nftw(path_.c_str(), remove_entry, 64, FTW_DEPTH | FTW_PHYS | FTW_MOUNT);
}

void TempDir::write(std::string_view rel, std::string_view content, unsigned mode) const {
  std::string p = *this / rel;
  auto slash = p.rfind('/');
  mkdir_p(p.substr(0, slash), 0755);
  ::unlink(p.c_str());
  std::ofstream out(p, std::ios::binary);
  out.write(content.data(), static_cast<std::streamsize>(content.size()));
  out.close();
  if (!out) throw std::runtime_error("writing " + p + " failed");
  ::chmod(p.c_str(), mode);
}

void TempDir::mkdir(std::string_view rel, unsigned mode) const { mkdir_p(*this / rel, mode); }

void TempDir::symlink(std::string_view target, std::string_view rel) const {
  std::string p = *this / rel;
  if (::symlink(std::string(target).c_str(), p.c_str()) < 0) throw std::runtime_error("symlink " + p + " failed");
}

std::string TempDir::read(std::string_view rel) const { return read_file(*this / rel); }

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

bool lexists(const std::string& path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0;
}

std::vector<std::string> names_in(const std::string& dir, const std::string& suffix) {
  std::vector<std::string> out;
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) throw std::runtime_error("cannot list " + dir);
  while (dirent* e = ::readdir(d)) {
    std::string n = e->d_name;
    if (n == "." || n == "..") continue;
    if (suffix.empty()) {
      out.push_back(n);
    } else if (n.size() > suffix.size() && n.compare(n.size() - suffix.size(), suffix.size(), suffix) == 0) {
      out.push_back(n.substr(0, n.size() - suffix.size()));
    }
  }
  ::closedir(d);
  std::sort(out.begin(), out.end());
  return out;
}

std::string data_dir() {
  const char* d = std::getenv("CTX_TEST_DATA");
  if (d == nullptr) throw std::runtime_error("CTX_TEST_DATA is not set (run the tests through meson test)");
  return d;
}

}  // namespace ctx::test
