// A one-line progress bar on stderr for the command line: "[#######.....]  58%  decoding".
//
// Drawn only when stderr is a terminal and output is not quiet; otherwise every call is a no-op,
// so logs and pipes stay clean. Redraws at most 10 times a second. Thread-safe: the callback may
// be called from worker threads.
#pragma once

#include "core/log.h"
#include "core/progress.h"

#include <chrono>
#include <mutex>
#include <string>

namespace voxseg::app {

class ProgressBar {
  public:
    // enabled = false gives a silent bar (quiet mode, not a terminal).
    explicit ProgressBar(bool enabled);
    ~ProgressBar();
    ProgressBar(const ProgressBar&) = delete;
    ProgressBar& operator=(const ProgressBar&) = delete;

    // True when stderr is a terminal (and TERM is not "dumb").
    static bool stderrIsTerminal();

    // A callback for voxseg::Progress; the bar must outlive the Progress that holds it.
    ProgressCallback callback();
    // Erases the bar so the next line of output starts clean.
    void clear();
    // A log sink that erases the bar before each record goes to `inner`, so log lines never
    // land in the middle of the bar.
    std::shared_ptr<log::Sink> wrapSink(std::shared_ptr<log::Sink> inner);

  private:
    void update(double fraction, std::string_view stage);

    bool enabled_;
    std::mutex mutex_;
    std::chrono::steady_clock::time_point last_draw_{};
    int last_percent_ = -1;
    bool drawn_ = false;
};

}  // namespace voxseg::app
