// Clock helpers: elapsed seconds on the monotonic clock (stage timings, grace periods) and the
// wall clock as Unix seconds (journal and record time stamps). Header-only.
#pragma once

#include <chrono>

namespace voxseg {

// Seconds elapsed since `start` on std::chrono::steady_clock (never jumps with the wall clock).
inline double secondsSince(std::chrono::steady_clock::time_point start) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// Seconds since the Unix epoch on the wall clock, with sub-second precision. For time stamps
// written to records; use secondsSince for durations.
inline double unixNow() {
    return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch())
        .count();
}

}  // namespace voxseg
