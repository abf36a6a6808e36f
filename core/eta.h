// Time left of a long task (a model run, a scan) from its progress fraction and the time it has
// run, and the text a front end shows for it: "43 % - about 12 s left". The estimate is linear
// (time so far / fraction done, times the fraction left): no estimate is given before the task
// has run kMinSeconds and done kMinFraction, where the first reports (a model import, a
// header scan) say little about the rest. Qt-free; an EtaEstimator is a value, not thread-safe
// (feed it from one thread).
#pragma once

#include <optional>
#include <string>

namespace voxseg {

class EtaEstimator {
  public:
    static constexpr double kMinSeconds = 1.0;
    static constexpr double kMinFraction = 0.02;

    // `fraction` in [0, 1] of the work done `elapsed_s` seconds after the start. Returns the
    // seconds left, or nullopt while it is too early to tell (or the fraction went backwards:
    // a task that restarted its count says nothing about the time left until it passes its old
    // high mark again).
    std::optional<double> update(double fraction, double elapsed_s);
    void reset() { *this = EtaEstimator(); }

  private:
    double high_fraction_ = 0;
};

// "about 12 s left", "about 3 min left", "about 1 h 5 min left" (seconds rounded to whole
// seconds under a minute, to whole minutes above).
std::string formatTimeLeft(double seconds);
// "43 %" (fraction rounded down: 99.9 % is not "100 %"), with " - about 12 s left" when
// `seconds_left` is known (and not under half a second: the task is about to end).
std::string progressText(double fraction, std::optional<double> seconds_left);

}  // namespace voxseg
