// view/position.hpp: the directory positions the view hands the kernel.
#include <catch2/catch.hpp>

#include <set>

#include "view/position.hpp"

using ctx::view::PositionCipher;

TEST_CASE("directory positions are mapped both ways, and indices lose their order and gaps", "[unit]") {
  const PositionCipher c({0x0123456789abcdefULL, 0xfedcba9876543210ULL, 42, 7});
  const std::uint64_t top = std::uint64_t{1} << 63;
  CHECK(c.hide(0) == 0);
  CHECK(c.reveal(0) == 0);
  CHECK(c.hide(top) == top);  // no position: as it is
  CHECK(c.reveal(~std::uint64_t{0}) == ~std::uint64_t{0});
  std::set<std::uint64_t> seen;
  std::size_t ascending = 0;
  std::uint64_t last = 0;
  // tmpfs's indices, ext4's hash cookies and its end marker.
  for (std::uint64_t p : {std::uint64_t{1}, std::uint64_t{2}, std::uint64_t{3}, top - 1, std::uint64_t{0x12345678} << 32})
    seen.insert(p);
  for (std::uint64_t p = 1; p <= 1000; ++p) {
    std::uint64_t h = c.hide(p);
    CHECK(h != 0);
    CHECK(h < top);
    CHECK(c.reveal(h) == p);
    if (h > last) ++ascending;
    last = h;
    seen.insert(h);
  }
  for (std::uint64_t p : {top - 1, std::uint64_t{0x12345678} << 32}) CHECK(c.reveal(c.hide(p)) == p);
  CHECK(seen.size() >= 1000);  // no two positions share a value
  CHECK(ascending > 400);      // about half, not all: the order is gone
  CHECK(ascending < 600);
  // Another key, other values.
  const PositionCipher other({1, 2, 3, 4});
  CHECK(other.hide(5) != c.hide(5));
}
