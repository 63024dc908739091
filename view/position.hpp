// The directory positions the view hands the kernel. A READDIR resumes at
// the host file system's own position (view/server.cpp); handed over as
// they are, those positions would tell an agent where the names it cannot
// see lie (on tmpfs they are indices: the gap between two shown names is
// the number of hidden ones between them). So each is mapped through a
// keyed permutation whose key is drawn when the server starts: the kernel
// and the agent see only the mapped values, and the server maps them back.
#pragma once

#include <array>
#include <cstdint>

namespace ctx::view {

/// A keyed permutation of the directory positions 1 .. 2^63-1 (0, the
/// start of a directory, stays 0): four rounds of a 32-bit Feistel
/// network, walked again while the value leaves the range.
class PositionCipher {
 public:
  /// A cipher with these round keys.
  explicit PositionCipher(const std::array<std::uint64_t, 4>& keys) : keys_(keys) {}

  /// The position the kernel sees for the host's position `host`.
  std::uint64_t hide(std::uint64_t host) const;
  /// The host's position for what the kernel handed back; a value that
  /// is no position (2^63 and above) is handed back unchanged.
  std::uint64_t reveal(std::uint64_t shown) const;

 private:
  std::uint64_t encrypt(std::uint64_t v) const;
  std::uint64_t decrypt(std::uint64_t v) const;
  std::array<std::uint64_t, 4> keys_;
};

}  // namespace ctx::view
