#include "core/log.h"

#include "core/free_text.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace voxseg::log {
namespace {

// A registered person name, in ASCII lower case: its family and given names as words, in both
// orders (empty when it has no given name), and every word of 3 or more characters.
struct Name {
    std::vector<std::string> family_given, given_family;
    std::vector<std::string> words;
};

// What scrubbing looks for, in ASCII lower case.
struct Pattern {
    enum class Kind {
        kIdentifier,  // anywhere, as a substring
        kNumber,      // an all-digit identifier: not inside a longer run of digits
        kName,        // `words` joined by runs of name separators, whole words
        kWord,        // a name word standing alone (free text only)
    };
    Kind kind;
    std::vector<std::string> words;  // one unless kName
};

// Every registered identifier and name, indexed by the first three bytes a match starts with,
// so that scrubbing a message costs its length, not the number of patients a process has seen.
struct State {
    std::mutex mutex;
    std::shared_ptr<Sink> sink = makeStderrSink();
    std::unordered_set<std::string> identifiers;  // ASCII lower case
    std::vector<Pattern> patterns;
    std::unordered_map<uint32_t, std::vector<uint32_t>> by_start;  // first 3 bytes -> patterns
    std::vector<uint32_t> short_start;  // names whose first word is shorter than 3 bytes
};

State& state() {
    static State s;
    return s;
}

std::atomic<Level> g_min_level{Level::kInfo};

char fold(char c) { return c >= 'A' && c <= 'Z' ? char(c - 'A' + 'a') : c; }

std::string folded(std::string_view s) {
    std::string out(s);
    for (char& c : out) c = fold(c);
    return out;
}

// Letters, digits and any byte of a multi-byte UTF-8 character.
bool isWordByte(char c) {
    const auto u = static_cast<unsigned char>(c);
    return (u >= '0' && u <= '9') || (u >= 'a' && u <= 'z') || (u >= 'A' && u <= 'Z') || u >= 0x80;
}

bool isNameSeparator(char c) {
    return c == ' ' || c == ',' || c == '^' || c == '.' || c == '_' || c == '\t';
}

// Whether `word` (lower case) is at text[pos], ignoring ASCII case.
bool wordAt(std::string_view text, size_t pos, std::string_view word) {
    if (pos + word.size() > text.size()) return false;
    for (size_t i = 0; i < word.size(); ++i)
        if (fold(text[pos + i]) != word[i]) return false;
    return true;
}

bool boundaryBefore(std::string_view text, size_t pos) {
    return pos == 0 || !isWordByte(text[pos - 1]);
}
bool boundaryAfter(std::string_view text, size_t end) {
    return end >= text.size() || !isWordByte(text[end]);
}

// The length of `words` at text[pos] joined by runs of name separators, or 0.
size_t wordsAt(std::string_view text, size_t pos, const std::vector<std::string>& words) {
    size_t p = pos;
    for (size_t w = 0; w < words.size(); ++w) {
        if (w > 0) {
            const size_t sep = p;
            while (p < text.size() && isNameSeparator(text[p])) ++p;
            if (p == sep) return 0;
        }
        if (!wordAt(text, p, words[w])) return 0;
        p += words[w].size();
    }
    return p - pos;
}

uint32_t startKey(std::string_view lower_three) {
    return uint32_t(uint8_t(lower_three[0])) | uint32_t(uint8_t(lower_three[1])) << 8 |
           uint32_t(uint8_t(lower_three[2])) << 16;
}

// The length of `p` matched at text[pos], or 0.
size_t matchAt(std::string_view text, size_t pos, const Pattern& p) {
    switch (p.kind) {
        case Pattern::Kind::kIdentifier:
            return wordAt(text, pos, p.words[0]) ? p.words[0].size() : 0;
        case Pattern::Kind::kNumber: {
            const size_t n = p.words[0].size();
            const auto digit = [&](size_t i) { return text[i] >= '0' && text[i] <= '9'; };
            return (pos == 0 || !digit(pos - 1)) && wordAt(text, pos, p.words[0]) &&
                           (pos + n == text.size() || !digit(pos + n))
                       ? n
                       : 0;
        }
        case Pattern::Kind::kWord: {
            const size_t n = p.words[0].size();
            return boundaryBefore(text, pos) && wordAt(text, pos, p.words[0]) &&
                           boundaryAfter(text, pos + n)
                       ? n
                       : 0;
        }
        case Pattern::Kind::kName: {
            if (!boundaryBefore(text, pos)) return 0;
            const size_t n = wordsAt(text, pos, p.words);
            return n > 0 && boundaryAfter(text, pos + n) ? n : 0;
        }
    }
    return 0;
}

// `text` with the longest match at each position, left to right, replaced by "[PHI]"; name
// words standing alone only with `free_text`.
std::string scrubLocked(std::string_view text, const State& s, bool free_text) {
    std::string out;
    out.reserve(text.size());
    char three[3];
    for (size_t i = 0; i < text.size();) {
        size_t best = 0;
        const auto consider = [&](uint32_t index) {
            const Pattern& p = s.patterns[index];
            if (p.kind == Pattern::Kind::kWord && !free_text) return;
            best = std::max(best, matchAt(text, i, p));
        };
        if (i + 3 <= text.size()) {
            for (int k = 0; k < 3; ++k) three[k] = fold(text[i + k]);
            if (const auto it = s.by_start.find(startKey({three, 3})); it != s.by_start.end())
                for (const uint32_t index : it->second) consider(index);
        }
        for (const uint32_t index : s.short_start) consider(index);
        if (best > 0) {
            out += "[PHI]";
            i += best;
        } else {
            out += text[i++];
        }
    }
    return out;
}

void addPattern(State& s, Pattern::Kind kind, std::vector<std::string> words) {
    const auto index = static_cast<uint32_t>(s.patterns.size());
    const std::string& first = words.front();
    if (first.size() >= 3)
        s.by_start[startKey(first)].push_back(index);
    else
        s.short_start.push_back(index);
    s.patterns.push_back({kind, std::move(words)});
}

// The words of `s` (split at name separators), in lower case.
std::vector<std::string> nameWords(std::string_view s) {
    std::vector<std::string> words;
    std::string w;
    for (const char c : s) {
        if (isNameSeparator(c)) {
            if (!w.empty()) words.push_back(std::move(w));
            w.clear();
        } else {
            w += fold(c);
        }
    }
    if (!w.empty()) words.push_back(std::move(w));
    return words;
}

bool hasLetter(std::string_view s) {
    return std::any_of(s.begin(), s.end(), [](char c) {
        const auto u = static_cast<unsigned char>(c);
        return (u >= 'a' && u <= 'z') || (u >= 'A' && u <= 'Z') || u >= 0x80;
    });
}

// `identifier` as a person name, or nothing when it has no letters or no name separator.
std::optional<Name> parseName(std::string_view identifier) {
    if (!hasLetter(identifier) || identifier.find_first_of("^=, ") == std::string_view::npos)
        return std::nullopt;
    Name name;
    // PN: up to three component groups (alphabetic=ideographic=phonetic), each FAMILY^GIVEN^...
    size_t start = 0;
    while (start <= identifier.size()) {
        size_t end = identifier.find('=', start);
        if (end == std::string_view::npos) end = identifier.size();
        const std::string_view group = identifier.substr(start, end - start);
        std::vector<std::string> family, given;
        if (group.find('^') != std::string_view::npos) {
            const size_t caret = group.find('^');
            family = nameWords(group.substr(0, caret));
            const std::string_view rest = group.substr(caret + 1);
            given = nameWords(rest.substr(0, rest.find('^')));
        } else if (const size_t comma = group.find(','); comma != std::string_view::npos) {
            family = nameWords(group.substr(0, comma));  // "Doe, John"
            given = nameWords(group.substr(comma + 1));
        } else {
            // "John Doe": both orders are matched, so which word is the family name is moot.
            given = nameWords(group);
            if (given.size() > 1) {
                family.push_back(given.back());
                given.pop_back();
            }
        }
        if (name.family_given.empty() && !family.empty() && !given.empty()) {
            name.family_given = family;
            name.family_given.insert(name.family_given.end(), given.begin(), given.end());
            name.given_family = given;
            name.given_family.insert(name.given_family.end(), family.begin(), family.end());
        }
        for (const std::string& w : nameWords(group))
            if (w.size() >= 3 && hasLetter(w)) name.words.push_back(w);
        start = end + 1;
    }
    return name;
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
    const std::string id = folded(identifier);
    std::optional<Name> name = parseName(identifier);
    std::lock_guard lock(state().mutex);
    State& s = state();
    if (!s.identifiers.insert(id).second) return;
    // A patient ID "999" is not inside "0.99989" (a Dice in a log line): digits-only identifiers
    // match whole runs of digits, wherever they stand ("MRN999", "999_t1").
    const bool number =
        std::all_of(id.begin(), id.end(), [](char c) { return c >= '0' && c <= '9'; });
    addPattern(s, number ? Pattern::Kind::kNumber : Pattern::Kind::kIdentifier, {id});
    if (!name) return;
    if (!name->family_given.empty()) {
        addPattern(s, Pattern::Kind::kName, std::move(name->family_given));
        addPattern(s, Pattern::Kind::kName, std::move(name->given_family));
    }
    for (std::string& w : name->words) addPattern(s, Pattern::Kind::kWord, {std::move(w)});
}

std::string scrub(std::string_view text) {
    std::lock_guard lock(state().mutex);
    return scrubLocked(text, state(), false);
}

std::string scrubFreeText(std::string_view text) {
    std::lock_guard lock(state().mutex);
    return scrubLocked(text, state(), true);
}

std::string displayFreeText(std::string_view text, bool show_phi) {
    return show_phi ? std::string(text) : scrubFreeText(text);
}

void write(Level level, std::string_view component, std::string message) {
    if (level < g_min_level) return;
    std::lock_guard lock(state().mutex);
    if (!state().sink) return;
    Record r{level, std::string(component), scrubLocked(message, state(), false),
             std::chrono::system_clock::now()};
    state().sink->write(r);
}

}  // namespace voxseg::log
