// Tensor: a dense, row-major, host-memory n-d array (NCDHW for 3D activations).
//
// Storage is shared and 64-byte aligned; copying a Tensor shares the buffer (clone() copies).
// Used for ONNX initializers, graph inputs/outputs and test data. Backends keep their own device
// or blocked-layout buffers internally. Thread-compatible.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace voxseg::engine {

enum class DType { kFloat32, kFloat16, kBFloat16, kInt64, kInt32, kUInt8, kBool };

const char* dtypeName(DType type);
size_t dtypeSize(DType type);

using Shape = std::vector<int64_t>;

int64_t numel(const Shape& shape);
std::string shapeToString(const Shape& shape);  // "[1, 32, 64, 64, 64]"

class Tensor {
  public:
    Tensor() = default;
    // Zero-filled tensor of the given type and shape.
    Tensor(DType dtype, Shape shape);

    static Tensor fromFloats(Shape shape, const std::vector<float>& values);
    static Tensor fromInt64s(Shape shape, const std::vector<int64_t>& values);

    bool empty() const { return !storage_; }
    DType dtype() const { return dtype_; }
    const Shape& shape() const { return shape_; }
    int64_t dim(size_t i) const { return shape_[i]; }
    size_t rank() const { return shape_.size(); }
    int64_t numel() const { return engine::numel(shape_); }
    size_t bytes() const { return static_cast<size_t>(numel()) * dtypeSize(dtype_); }

    void* raw() { return storage_.get(); }
    const void* raw() const { return storage_.get(); }
    template <typename T>
    T* data() {
        return static_cast<T*>(raw());
    }
    template <typename T>
    const T* data() const {
        return static_cast<const T*>(raw());
    }

    Tensor clone() const;
    // Same storage, new shape with the same element count.
    Tensor reshaped(Shape shape) const;
    // Values as int64 (for shape-like constants of type int64/int32); empty if not integral.
    std::vector<int64_t> toInt64s() const;
    // Values converted to float32 (from f32/f16/bf16/int types).
    std::vector<float> toFloats() const;

  private:
    DType dtype_ = DType::kFloat32;
    Shape shape_;
    std::shared_ptr<std::byte[]> storage_;
};

// IEEE half and bfloat16 conversions (round to nearest even), shared by all backends' tests.
// floatToBFloat16 is inline: the CPU backend's packing loops vectorize it.
uint16_t floatToHalf(float f);
float halfToFloat(uint16_t h);
inline uint16_t floatToBFloat16(float f) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40);  // NaN
    u += 0x7fffu + ((u >> 16) & 1u);
    return static_cast<uint16_t>(u >> 16);
}
float bfloat16ToFloat(uint16_t b);

// The single value of a one-element tensor (nullopt when it has 0 or several elements).
inline std::optional<double> scalarOf(const Tensor& t) {
    if (t.numel() != 1) return std::nullopt;
    return static_cast<double>(t.toFloats()[0]);
}

}  // namespace voxseg::engine
