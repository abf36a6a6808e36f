#include "core/log.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <mutex>
#include <vector>

namespace voxseg::log {
namespace {

struct State {
    std::mutex mutex;
    std::shared_ptr<Sink> sink = makeStderrSink();
    std::vector<std::string> identifiers;
};

State& state() {
    static State s;
    return s;
}

std::atomic<Level> g_min_level{Level::kInfo};

std::string scrubLocked(std::string_view text, const std::vector<std::string>& identifiers) {
    std::string out(text);
    for (const auto& id : identifiers) {
        for (size_t pos = out.find(id); pos != std::string::npos; pos = out.find(id, pos + 5)) {
            out.replace(pos, id.size(), "[PHI]");
        }
    }
    return out;
}

class StderrSink final : public Sink {
  public:
    void write(const Record& r) override {
        if (r.component.empty()) {
            std::fprintf(stderr, "%s: %s\n", levelName(r.level), r.message.c_str());
        } else {
            std::fprintf(stderr, "%s [%s] %s\n", levelName(r.level), r.component.c_str(),
                         r.message.c_str());
        }
    }
};

class JsonLinesSink final : public Sink {
  public:
    void write(const Record& r) override {
        const auto ms =
            std::chrono::duration_cast<std::chrono::milliseconds>(r.time.time_since_epoch())
                .count();
        nlohmann::json j = {{"time_ms", ms},
                            {"level", levelName(r.level)},
                            {"component", r.component},
                            {"message", r.message}};
        std::fprintf(stderr, "%s\n",
                     j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
    }
};

}  // namespace

const char* levelName(Level level) {
    switch (level) {
        case Level::kDebug:
            return "debug";
        case Level::kInfo:
            return "info";
        case Level::kWarning:
            return "warning";
        case Level::kError:
            return "error";
    }
    return "?";
}

std::shared_ptr<Sink> makeStderrSink() { return std::make_shared<StderrSink>(); }
std::shared_ptr<Sink> makeJsonLinesSink() { return std::make_shared<JsonLinesSink>(); }

std::shared_ptr<Sink> setSink(std::shared_ptr<Sink> sink) {
    std::lock_guard lock(state().mutex);
    std::swap(state().sink, sink);
    return sink;
}

void setMinLevel(Level level) { g_min_level = level; }
Level minLevel() { return g_min_level; }

void registerIdentifier(std::string_view identifier) {
    // Trim DICOM padding; very short strings would redact ordinary words.
    while (!identifier.empty() && (identifier.back() == ' ' || identifier.back() == '\0'))
        identifier.remove_suffix(1);
    if (identifier.size() < 3) return;
    std::lock_guard lock(state().mutex);
    auto& ids = state().identifiers;
    if (std::find(ids.begin(), ids.end(), identifier) == ids.end()) {
        ids.emplace_back(identifier);
        // Longest first, so "DOE^JOHN" is replaced before "DOE".
        std::sort(ids.begin(), ids.end(),
                  [](const std::string& a, const std::string& b) { return a.size() > b.size(); });
    }
}

std::string scrub(std::string_view text) {
    std::lock_guard lock(state().mutex);
    return scrubLocked(text, state().identifiers);
}

void write(Level level, std::string_view component, std::string message) {
    if (level < g_min_level) return;
    std::lock_guard lock(state().mutex);
    if (!state().sink) return;
    Record r{level, std::string(component), scrubLocked(message, state().identifiers),
             std::chrono::system_clock::now()};
    state().sink->write(r);
}

}  // namespace voxseg::log
