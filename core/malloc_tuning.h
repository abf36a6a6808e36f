// Large buffers go straight back to the system when freed (glibc).
//
// glibc raises its mmap threshold each time a large mmapped block is freed (up to 32 MiB); after
// that, a study's 5-40 MiB buffers come from the heap and the per-thread arenas and fragment
// them, so the peak memory depends on the order of frees and on which thread allocated what:
// - `voxseg batch` of CT phantoms: the peak grew from 490 to 646 MiB over 20 cases;
// - one `voxseg segment` of a 256x256x150 phantom: 153-164 MiB from run to run once the outputs
//   were written side by side, against 139-140 MiB every time with a fixed threshold.
// A fixed 4 MiB threshold keeps every large buffer mapped: batch 409 -> 421 MiB over the same 20
// cases for about 2.5 % more time (page faults); segment no measurable time. Call it first in
// main(). MALLOC_MMAP_THRESHOLD_ in the environment wins; elsewhere than glibc it does nothing.
#pragma once

namespace voxseg {

void keepLargeAllocationsMapped();

}  // namespace voxseg
