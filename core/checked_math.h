// Overflow-checked int64 arithmetic for values that come from files (ONNX shapes and constants,
// image headers): signed overflow is undefined behaviour in C++, so every product, sum or
// difference of such values goes through these (GCC/Clang __builtin_*_overflow), and a caller
// that gets nullopt refuses the input naming the operation and the values.
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <span>

namespace voxseg {

inline std::optional<int64_t> checkedAdd(int64_t a, int64_t b) {
    int64_t r;
    if (__builtin_add_overflow(a, b, &r)) return std::nullopt;
    return r;
}

inline std::optional<int64_t> checkedSub(int64_t a, int64_t b) {
    int64_t r;
    if (__builtin_sub_overflow(a, b, &r)) return std::nullopt;
    return r;
}

inline std::optional<int64_t> checkedMul(int64_t a, int64_t b) {
    int64_t r;
    if (__builtin_mul_overflow(a, b, &r)) return std::nullopt;
    return r;
}

// a / b and a % b: nullopt for b == 0 and for INT64_MIN / -1 (whose quotient does not fit).
inline std::optional<int64_t> checkedDiv(int64_t a, int64_t b) {
    if (b == 0 || (a == std::numeric_limits<int64_t>::min() && b == -1)) return std::nullopt;
    return a / b;
}

inline std::optional<int64_t> checkedMod(int64_t a, int64_t b) {
    if (b == 0) return std::nullopt;
    if (b == -1) return 0;  // INT64_MIN % -1 traps on x86
    return a % b;
}

inline std::optional<int64_t> checkedNeg(int64_t a) {
    if (a == std::numeric_limits<int64_t>::min()) return std::nullopt;
    return -a;
}

// The product of all values (1 for none); nullopt when it overflows int64. Used for element
// counts of shapes (negative entries are multiplied as they are: callers check signs).
inline std::optional<int64_t> checkedProduct(std::span<const int64_t> values) {
    int64_t r = 1;
    for (int64_t v : values)
        if (__builtin_mul_overflow(r, v, &r)) return std::nullopt;
    return r;
}

}  // namespace voxseg
