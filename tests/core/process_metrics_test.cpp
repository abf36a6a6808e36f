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

TEST(ProcessMetrics, CpuSecondsCountWorkDone) {
    const double before = processCpuSeconds();
    const auto start = std::chrono::steady_clock::now();
    volatile double x = 0;
    while (std::chrono::steady_clock::now() - start < std::chrono::milliseconds(200)) x = x + 1.0;
    const double spent = processCpuSeconds() - before;
    EXPECT_GT(spent, 0.1);
    EXPECT_LT(spent, 5.0);
}

}  // namespace
}  // namespace voxseg
