// UniqueFd: a move-only owner of one file descriptor.
#pragma once

#include <utility>

namespace ctx {

/// Owns a file descriptor and closes it on destruction. -1 means empty.
class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  UniqueFd(UniqueFd&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
  UniqueFd& operator=(UniqueFd&& o) noexcept {
    if (this != &o) reset(std::exchange(o.fd_, -1));
    return *this;
  }
  ~UniqueFd() { reset(); }

  /// The descriptor, still owned.
  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  explicit operator bool() const { return valid(); }
  /// Gives up ownership and returns the descriptor.
  int release() { return std::exchange(fd_, -1); }
  /// Closes the current descriptor (if any) and owns fd instead.
  void reset(int fd = -1);

 private:
  int fd_ = -1;
};

}  // namespace ctx
