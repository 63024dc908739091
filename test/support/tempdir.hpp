// A temporary directory for one test, removed with everything in it.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace ctx::test {

/// Creates a fresh directory under $TMPDIR (or /tmp) and removes it,
/// recursively and without following symlinks, on destruction.
class TempDir {
 public:
  TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  ~TempDir();

  const std::string& path() const { return path_; }
  /// path() + "/" + rel
  std::string operator/(std::string_view rel) const { return path_ + "/" + std::string(rel); }

  /// Writes a file (creating parent directories) with the given mode.
  void write(std::string_view rel, std::string_view content, unsigned mode = 0644) const;
  /// Creates a directory and its parents.
  void mkdir(std::string_view rel, unsigned mode = 0755) const;
  /// Creates a symlink rel -> target.
  void symlink(std::string_view target, std::string_view rel) const;
  /// Reads a whole file.
  std::string read(std::string_view rel) const;

 private:
  std::string path_;
};

/// Reads a whole file by path; throws std::runtime_error if it cannot.
std::string read_file(const std::string& path);

/// Reads a whole file by path; "" when it cannot (absent, unreadable), for
/// files that may not be there yet.
std::string slurp(const std::string& path);

/// Whether path names an entry, a symbolic link itself included (lstat).
bool lexists(const std::string& path);

/// Sorted names in a directory (without "." and ".."); with a suffix, only
/// the names ending in it, with the suffix removed.
std::vector<std::string> names_in(const std::string& dir, const std::string& suffix = "");

/// Directory of the test corpora (test/data), from CTX_TEST_DATA.
std::string data_dir();

}  // namespace ctx::test
