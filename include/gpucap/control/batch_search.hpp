#pragma once
// The binary search over an ordered set of batch sizes shared by BatchSizer (ASP-DAC'21
// Algorithm 1) and BatchDVFS (TPDS'22): indices lo <= cur <= hi into the set.

namespace gpucap::control {

struct BatchSearch {
  int lo = 0;
  int hi = 0;
  int cur = 0;
  bool operator==(const BatchSearch&) const = default;
};

// Power below the band: move up. At cur == hi the upper half [hi, top] is re-opened (BatchDVFS
// code; BatchSizer's pseudo-code omits it, which would strand the search after a shrink).
// Callers handle cur == top themselves (BatchDVFS raises the clock there).
[[nodiscard]] BatchSearch search_up(BatchSearch search, int top_index);

// Power above the cap: move down. At cur == lo the search restarts on [0, lo]; at cur == 0
// nothing can shrink (callers handle it: BatchDVFS lowers the clock).
[[nodiscard]] BatchSearch search_down(BatchSearch search);

}  // namespace gpucap::control
