#include "core/malloc_tuning.h"

#include <cstdlib>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace voxseg {

void keepLargeAllocationsMapped() {
#if defined(__GLIBC__)
    if (std::getenv("MALLOC_MMAP_THRESHOLD_") == nullptr) mallopt(M_MMAP_THRESHOLD, 4 << 20);
#endif
}

}  // namespace voxseg
