// Integers from JSON files that voxseg reads back (batch journal, the node's spool records, edit
// sessions): nlohmann's get<int>() static_casts a floating-point value, and a cast of 3e77 to
// an integer type is undefined behaviour (UBSan; fuzz_batch_journal). These accept an integer
// that fits T and nothing else, so a damaged file is refused instead.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <utility>

namespace voxseg {

template <typename T>
std::optional<T> jsonInteger(const nlohmann::json& v) {
    if (v.is_number_unsigned()) {
        const uint64_t u = v.get<uint64_t>();
        if (std::in_range<T>(u)) return static_cast<T>(u);
    } else if (v.is_number_integer()) {
        const int64_t i = v.get<int64_t>();
        if (std::in_range<T>(i)) return static_cast<T>(i);
    }
    return std::nullopt;
}

// object[key] as jsonInteger, `fallback` when the key is absent.
template <typename T>
std::optional<T> jsonInteger(const nlohmann::json& object, const char* key, T fallback) {
    const auto it = object.find(key);
    return it == object.end() ? std::optional<T>(fallback) : jsonInteger<T>(*it);
}

}  // namespace voxseg
