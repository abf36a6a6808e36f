// Template body of batch::retryTransient (included from runner.h only).
#pragma once

#include "core/log.h"

#include <chrono>
#include <thread>

namespace voxseg::batch {

template <typename T>
Result<T> retryTransient(const std::function<Result<T>()>& fn, int retries, double delay_seconds,
                         const CancelToken& stop, int* attempts_out) {
    int attempt = 0;
    double delay = delay_seconds;
    for (;;) {
        ++attempt;
        if (attempts_out) *attempts_out = attempt;
        Result<T> r = fn();
        if (r.isOk() || r.status().code() != StatusCode::kIoError || attempt > retries ||
            stop.isCancelled())
            return r;
        log::warning("batch", "transient read error (attempt {} of {}), retrying in {:.1f} s: {}",
                     attempt, retries + 1, delay, r.status().toString());
        // Sleep in slices so that a stop is not delayed by a long back-off.
        const auto until = std::chrono::steady_clock::now() +
                           std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                               std::chrono::duration<double>(delay));
        while (std::chrono::steady_clock::now() < until && !stop.isCancelled())
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
        delay *= 2;
    }
}

}  // namespace voxseg::batch
