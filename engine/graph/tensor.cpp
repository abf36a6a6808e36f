#include "engine/graph/tensor.h"

#include <cstdlib>
#include <cstring>
#include <new>
#include <stdexcept>

namespace voxseg::engine {

const char* dtypeName(DType type) {
    switch (type) {
        case DType::kFloat32:
            return "float32";
        case DType::kFloat16:
            return "float16";
        case DType::kBFloat16:
            return "bfloat16";
        case DType::kInt64:
            return "int64";
        case DType::kInt32:
            return "int32";
        case DType::kUInt8:
            return "uint8";
        case DType::kBool:
            return "bool";
    }
    return "?";
}

size_t dtypeSize(DType type) {
    switch (type) {
        case DType::kFloat32:
        case DType::kInt32:
            return 4;
        case DType::kFloat16:
        case DType::kBFloat16:
            return 2;
        case DType::kInt64:
            return 8;
        case DType::kUInt8:
        case DType::kBool:
            return 1;
    }
    return 0;
}

int64_t numel(const Shape& shape) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
}

std::string shapeToString(const Shape& shape) {
    std::string s = "[";
    for (size_t i = 0; i < shape.size(); ++i) {
        if (i) s += ", ";
        s += std::to_string(shape[i]);
    }
    return s + "]";
}

Tensor::Tensor(DType dtype, Shape shape) : dtype_(dtype), shape_(std::move(shape)) {
    const size_t n = bytes();
    const size_t rounded = ((n + 63) / 64) * 64;
    void* p = std::aligned_alloc(64, rounded == 0 ? 64 : rounded);
    if (!p) throw std::bad_alloc();
    std::memset(p, 0, rounded == 0 ? 64 : rounded);
    storage_ = std::shared_ptr<std::byte[]>(static_cast<std::byte*>(p),
                                            [](std::byte* q) { std::free(q); });
}

Tensor Tensor::fromFloats(Shape shape, const std::vector<float>& values) {
    Tensor t(DType::kFloat32, std::move(shape));
    if (static_cast<int64_t>(values.size()) != t.numel())
        throw std::invalid_argument("Tensor::fromFloats: value count does not match shape");
    if (t.bytes() > 0) std::memcpy(t.raw(), values.data(), t.bytes());  // empty: no pointers
    return t;
}

Tensor Tensor::fromInt64s(Shape shape, const std::vector<int64_t>& values) {
    Tensor t(DType::kInt64, std::move(shape));
    if (static_cast<int64_t>(values.size()) != t.numel())
        throw std::invalid_argument("Tensor::fromInt64s: value count does not match shape");
    if (t.bytes() > 0) std::memcpy(t.raw(), values.data(), t.bytes());  // empty: no pointers
    return t;
}

Tensor Tensor::clone() const {
    if (empty()) return {};
    Tensor t(dtype_, shape_);
    std::memcpy(t.raw(), raw(), bytes());
    return t;
}

Tensor Tensor::reshaped(Shape shape) const {
    if (engine::numel(shape) != numel())
        throw std::invalid_argument("Tensor::reshaped: element count differs");
    Tensor t = *this;
    t.shape_ = std::move(shape);
    return t;
}

std::vector<int64_t> Tensor::toInt64s() const {
    std::vector<int64_t> out(static_cast<size_t>(numel()));
    switch (dtype_) {
        case DType::kInt64:  // (an empty tensor has no storage to copy from)
            if (!out.empty()) std::memcpy(out.data(), raw(), bytes());
            break;
        case DType::kInt32:
            for (size_t i = 0; i < out.size(); ++i) out[i] = data<int32_t>()[i];
            break;
        case DType::kUInt8:
        case DType::kBool:
            for (size_t i = 0; i < out.size(); ++i) out[i] = data<uint8_t>()[i];
            break;
        default:
            return {};
    }
    return out;
}

std::vector<float> Tensor::toFloats() const {
    std::vector<float> out(static_cast<size_t>(numel()));
    for (size_t i = 0; i < out.size(); ++i) {
        switch (dtype_) {
            case DType::kFloat32:
                out[i] = data<float>()[i];
                break;
            case DType::kFloat16:
                out[i] = halfToFloat(data<uint16_t>()[i]);
                break;
            case DType::kBFloat16:
                out[i] = bfloat16ToFloat(data<uint16_t>()[i]);
                break;
            case DType::kInt64:
                out[i] = static_cast<float>(data<int64_t>()[i]);
                break;
            case DType::kInt32:
                out[i] = static_cast<float>(data<int32_t>()[i]);
                break;
            case DType::kUInt8:
            case DType::kBool:
                out[i] = static_cast<float>(data<uint8_t>()[i]);
                break;
        }
    }
    return out;
}

float bfloat16ToFloat(uint16_t b) {
    const uint32_t u = static_cast<uint32_t>(b) << 16;
    float f;
    std::memcpy(&f, &u, 4);
    return f;
}

uint16_t floatToHalf(float f) {
    uint32_t x;
    std::memcpy(&x, &f, 4);
    const uint32_t sign = (x >> 16) & 0x8000u;
    uint32_t mant = x & 0x007fffffu;
    int32_t exp = static_cast<int32_t>((x >> 23) & 0xffu);
    if (exp == 0xff) return static_cast<uint16_t>(sign | 0x7c00u | (mant ? 0x200u : 0u));
    exp = exp - 127 + 15;
    if (exp >= 0x1f) return static_cast<uint16_t>(sign | 0x7c00u);  // overflow -> inf
    if (exp <= 0) {
        if (exp < -10) return static_cast<uint16_t>(sign);
        mant |= 0x00800000u;
        const uint32_t shift = static_cast<uint32_t>(14 - exp);
        uint32_t h = mant >> shift;
        const uint32_t rem = mant & ((1u << shift) - 1u);
        const uint32_t half = 1u << (shift - 1);
        if (rem > half || (rem == half && (h & 1u))) ++h;
        return static_cast<uint16_t>(sign | h);
    }
    uint32_t h = (static_cast<uint32_t>(exp) << 10) | (mant >> 13);
    const uint32_t rem = mant & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;  // may carry into exponent: correct
    return static_cast<uint16_t>(sign | h);
}

float halfToFloat(uint16_t h) {
    const uint32_t sign = (static_cast<uint32_t>(h) & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t mant = h & 0x3ffu;
    uint32_t u;
    if (exp == 0) {
        if (mant == 0) {
            u = sign;
        } else {
            exp = 127 - 15 + 1;
            while (!(mant & 0x400u)) {
                mant <<= 1;
                --exp;
            }
            mant &= 0x3ffu;
            u = sign | (exp << 23) | (mant << 13);
        }
    } else if (exp == 0x1f) {
        u = sign | 0x7f800000u | (mant << 13);
    } else {
        u = sign | ((exp - 15 + 127) << 23) | (mant << 13);
    }
    float f;
    std::memcpy(&f, &u, 4);
    return f;
}

}  // namespace voxseg::engine
