#include "app/progress_bar.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace voxseg::app {
namespace {
constexpr int kBarWidth = 30;
constexpr auto kMinRedraw = std::chrono::milliseconds(100);
}  // namespace

ProgressBar::ProgressBar(bool enabled) : enabled_(enabled) {}

ProgressBar::~ProgressBar() { clear(); }

bool ProgressBar::stderrIsTerminal() {
    const char* term = std::getenv("TERM");
    return ::isatty(STDERR_FILENO) == 1 && !(term && std::strcmp(term, "dumb") == 0);
}

ProgressCallback ProgressBar::callback() {
    if (!enabled_) return {};
    return [this](double fraction, std::string_view stage) { update(fraction, stage); };
}

void ProgressBar::update(double fraction, std::string_view stage) {
    std::lock_guard lock(mutex_);
    const int percent = static_cast<int>(fraction * 100.0 + 0.5);
    const auto now = std::chrono::steady_clock::now();
    if (percent == last_percent_ || (now - last_draw_ < kMinRedraw && percent < 100)) return;
    last_percent_ = percent;
    last_draw_ = now;
    const int filled = percent * kBarWidth / 100;
    std::string bar(static_cast<size_t>(filled), '#');
    bar.append(static_cast<size_t>(kBarWidth - filled), '.');
    std::string label(stage.substr(0, 40));
    std::fprintf(stderr, "\r[%s] %3d%%  %-40s", bar.c_str(), percent, label.c_str());
    std::fflush(stderr);
    drawn_ = true;
}

void ProgressBar::clear() {
    std::lock_guard lock(mutex_);
    if (!drawn_) return;
    std::fprintf(stderr, "\r%*s\r", kBarWidth + 50, "");
    std::fflush(stderr);
    drawn_ = false;
    last_percent_ = -1;
}

namespace {
class BarClearingSink final : public log::Sink {
  public:
    BarClearingSink(ProgressBar* bar, std::shared_ptr<log::Sink> inner)
        : bar_(bar), inner_(std::move(inner)) {}
    void write(const log::Record& record) override {
        bar_->clear();
        if (inner_) inner_->write(record);
    }

  private:
    ProgressBar* bar_;
    std::shared_ptr<log::Sink> inner_;
};
}  // namespace

std::shared_ptr<log::Sink> ProgressBar::wrapSink(std::shared_ptr<log::Sink> inner) {
    if (!enabled_) return inner;
    return std::make_shared<BarClearingSink>(this, std::move(inner));
}

}  // namespace voxseg::app
