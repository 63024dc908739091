#include "view/position.hpp"

namespace ctx::view {

namespace {

constexpr std::uint64_t kTop = std::uint64_t{1} << 63;

bool in_range(std::uint64_t v) { return v != 0 && v < kTop; }

// splitmix64's finaliser of (half ^ key): a round function.
std::uint32_t round_fn(std::uint32_t half, std::uint64_t key) {
  std::uint64_t z = (half ^ key) + 0x9e3779b97f4a7c15ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return static_cast<std::uint32_t>(z ^ (z >> 31));
}

}  // namespace

std::uint64_t PositionCipher::encrypt(std::uint64_t v) const {
  auto l = static_cast<std::uint32_t>(v >> 32), r = static_cast<std::uint32_t>(v);
  for (std::uint64_t k : keys_) {
    std::uint32_t next = l ^ round_fn(r, k);
    l = r;
    r = next;
  }
  return (std::uint64_t{l} << 32) | r;
}

std::uint64_t PositionCipher::decrypt(std::uint64_t v) const {
  auto l = static_cast<std::uint32_t>(v >> 32), r = static_cast<std::uint32_t>(v);
  for (auto k = keys_.rbegin(); k != keys_.rend(); ++k) {
    std::uint32_t prev = r ^ round_fn(l, *k);
    r = l;
    l = prev;
  }
  return (std::uint64_t{l} << 32) | r;
}

// Cycle walking: a permutation of all 64-bit values, applied again until
// the value is in range, is a permutation of the range.
std::uint64_t PositionCipher::hide(std::uint64_t host) const {
  if (!in_range(host)) return host;
  std::uint64_t v = encrypt(host);
  while (!in_range(v)) v = encrypt(v);
  return v;
}

std::uint64_t PositionCipher::reveal(std::uint64_t shown) const {
  if (!in_range(shown)) return shown;
  std::uint64_t v = decrypt(shown);
  while (!in_range(v)) v = decrypt(v);
  return v;
}

}  // namespace ctx::view
