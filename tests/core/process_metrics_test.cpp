// core/process_metrics.h: resident memory now and at its peak, and CPU time, follow what the
// process does (Linux).
#include "core/process_metrics.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <memory>

namespace voxseg {
namespace {

TEST(ProcessMetrics, TouchingMemoryRaisesCurrentAndPeakResidentSet) {
    const double peak_before = peakRssMib();
    const double now_before = currentRssMib();
    ASSERT_GT(now_before, 0.0);
    constexpr size_t kBytes = size_t{96} << 20;
    auto block = std::make_unique<char[]>(kBytes);
    std::memset(block.get(), 1, kBytes);  // resident once written
    const double now_after = currentRssMib();
    const double peak_after = peakRssMib();
    EXPECT_GE(now_after - now_before, 80.0) << now_before << " -> " << now_after;
    EXPECT_GE(peak_after, now_after - 1.0);  // the peak is at least what is resident now
    EXPECT_GE(peak_after, peak_before);
    volatile char sink = block[kBytes / 2];
    (void)sink;
    block.reset();
    EXPECT_GE(peakRssMib(), peak_after);  // a high-water mark does not fall
}

// Work until the counter moves by 50 ms of CPU (a counter that never moves fails at the 20 s
// cap); one thread cannot spend more CPU than wall time. No timing bound on a shared machine.
TEST(ProcessMetrics, CpuSecondsCountWorkDone) {
    const double before = processCpuSeconds();
    const auto start = std::chrono::steady_clock::now();
    volatile double x = 0;
    double spent = 0;
    while (spent < 0.05 && std::chrono::steady_clock::now() - start < std::chrono::seconds(20)) {
        for (int i = 0; i < 100000; ++i) x = x + 1.0;
        spent = processCpuSeconds() - before;
    }
    const double wall =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    EXPECT_GE(spent, 0.05);
    EXPECT_LE(spent, wall + 0.05);
}

}  // namespace
}  // namespace voxseg
