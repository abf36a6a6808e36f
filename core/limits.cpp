#include "core/limits.h"

namespace voxseg {
namespace {

ReadLimits& current() {
    static ReadLimits limits;
    return limits;
}

}  // namespace

const ReadLimits& readLimits() { return current(); }

void setReadLimits(const ReadLimits& limits) { current() = limits; }

}  // namespace voxseg
