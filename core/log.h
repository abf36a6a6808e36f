// The one logging API of voxseg. Library code logs through these functions, never printf/cout.
//
// Sinks are swappable: stderr text (default), JSON lines (batch), a panel in the viewer. Messages
// must never carry patient identifiers: log series UIDs and paths, not names or IDs. As a second
// line of defence, io/ registers every patient name/ID/birth date it reads with
// registerIdentifier(); the logger replaces any registered string in a message with "[PHI]"
// before a sink sees it. Thread-safe: sinks are called under a mutex, one record at a time.
#pragma once

#include <fmt/format.h>

#include <chrono>
#include <memory>
#include <string>
#include <string_view>

namespace voxseg::log {

enum class Level { kDebug = 0, kInfo, kWarning, kError };

const char* levelName(Level level);

struct Record {
    Level level;
    std::string component;  // "io.dicom", "engine", ... (may be empty)
    std::string message;    // already scrubbed of registered identifiers
    std::chrono::system_clock::time_point time;
};

class Sink {
  public:
    virtual ~Sink() = default;
    virtual void write(const Record& record) = 0;
};

// Human-readable lines on stderr: "warning [io.dicom] series 1.2.3: gap of 2 slices".
std::shared_ptr<Sink> makeStderrSink();
// One JSON object per line on stderr: {"time":...,"level":...,"component":...,"message":...}.
std::shared_ptr<Sink> makeJsonLinesSink();

// Replaces the process-wide sink; returns the previous one. nullptr silences logging.
std::shared_ptr<Sink> setSink(std::shared_ptr<Sink> sink);
void setMinLevel(Level level);
Level minLevel();

// Adds a string (patient name, ID, birth date) that must never reach a sink. Strings shorter
// than 3 characters are ignored (they would redact ordinary words); one of digits only matches
// where no digit stands right before or after it (ID "999" is not in "0.99989"). A value with
// letters and a person-name separator ('^', '=', ',' or a space) is also a name: see
// core/free_text.h.
void registerIdentifier(std::string_view identifier);
// Returns `text` with every registered identifier (ASCII case ignored) and every registered name
// in any order and separator ("John Doe", "DOE, JOHN") replaced by "[PHI]". Every log record and
// audit event goes through it; free text goes through scrubFreeText (core/free_text.h).
std::string scrub(std::string_view text);

void write(Level level, std::string_view component, std::string message);

template <typename... Args>
void debug(std::string_view component, fmt::format_string<Args...> f, Args&&... args) {
    if (minLevel() <= Level::kDebug)
        write(Level::kDebug, component, fmt::format(f, std::forward<Args>(args)...));
}
template <typename... Args>
void info(std::string_view component, fmt::format_string<Args...> f, Args&&... args) {
    if (minLevel() <= Level::kInfo)
        write(Level::kInfo, component, fmt::format(f, std::forward<Args>(args)...));
}
template <typename... Args>
void warning(std::string_view component, fmt::format_string<Args...> f, Args&&... args) {
    if (minLevel() <= Level::kWarning)
        write(Level::kWarning, component, fmt::format(f, std::forward<Args>(args)...));
}
template <typename... Args>
void error(std::string_view component, fmt::format_string<Args...> f, Args&&... args) {
    write(Level::kError, component, fmt::format(f, std::forward<Args>(args)...));
}

}  // namespace voxseg::log
