#include "gpucap/control/batch_search.hpp"

namespace gpucap::control {

namespace {
int ceil_half(int a, int b) { return (a + b + 1) / 2; }  // indices are non-negative
int floor_half(int a, int b) { return (a + b) / 2; }
}  // namespace

BatchSearch search_up(BatchSearch s, int top_index) {
  if (s.cur == s.hi) {
    s.lo = s.hi;
    s.hi = top_index;
  } else {
    s.lo = s.cur;
  }
  s.cur = ceil_half(s.lo, s.hi);
  return s;
}

BatchSearch search_down(BatchSearch s) {
  if (s.cur == 0) return s;
  if (s.cur == s.lo) {
    s.hi = s.lo;
    s.lo = 0;
  } else {
    s.hi = s.cur;
  }
  s.cur = floor_half(s.lo, s.hi);
  return s;
}

}  // namespace gpucap::control
