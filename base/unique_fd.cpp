#include "base/unique_fd.hpp"

#include <unistd.h>

namespace ctx {

void UniqueFd::reset(int fd) {
  // close() is the one descriptor call base/ makes: its error cannot be
  // acted on (the fd is released either way, see close(2)), so it is
  // deliberately not reported.
  if (fd_ >= 0) ::close(fd_);
  fd_ = fd;
}

}  // namespace ctx
