// Volume: one 3D image as voxseg passes it between stages: an ITK image (pixels + geometry in
// LPS mm) plus what the loader learned about it (modality, series, warnings).
//
// Pixels are kept in the type they arrive in (int16 CT stays int16: a 512x512x500 CT is 250 MB,
// not 500) and converted to float32 only by stages that need it. Ownership: the ITK image is
// reference-counted; copying a Volume shares pixels (cheap), cloneVolume() deep-copies.
// Thread safety: concurrent reads are safe; writes need external synchronisation.
#pragma once

#include "core/geometry.h"
#include "core/status.h"

#include <itkImage.h>

#include <cstdint>
#include <string>
#include <vector>

namespace voxseg {

enum class PixelType { kUInt8, kInt8, kUInt16, kInt16, kUInt32, kInt32, kFloat32, kFloat64 };

const char* pixelTypeName(PixelType type);
size_t pixelTypeSize(PixelType type);

template <typename T>
using Image3 = itk::Image<T, 3>;

template <typename T>
constexpr PixelType pixelTypeOf();
template <>
constexpr PixelType pixelTypeOf<uint8_t>() {
    return PixelType::kUInt8;
}
template <>
constexpr PixelType pixelTypeOf<int8_t>() {
    return PixelType::kInt8;
}
template <>
constexpr PixelType pixelTypeOf<uint16_t>() {
    return PixelType::kUInt16;
}
template <>
constexpr PixelType pixelTypeOf<int16_t>() {
    return PixelType::kInt16;
}
template <>
constexpr PixelType pixelTypeOf<uint32_t>() {
    return PixelType::kUInt32;
}
template <>
constexpr PixelType pixelTypeOf<int32_t>() {
    return PixelType::kInt32;
}
template <>
constexpr PixelType pixelTypeOf<float>() {
    return PixelType::kFloat32;
}
template <>
constexpr PixelType pixelTypeOf<double>() {
    return PixelType::kFloat64;
}

// What is known about where a volume came from. No patient identifiers here: the CLI shows
// those only on request, through io/'s study records.
struct VolumeInfo {
    std::string modality;               // "CT", "MR", ... ("" when unknown)
    std::string series_uid;             // DICOM SeriesInstanceUID ("" for NIfTI etc.)
    std::string series_description;     // may be empty
    std::string source;                 // path of the file or folder it was read from
    std::vector<std::string> warnings;  // geometry/decoding warnings, each once
};

class Volume {
  public:
    Volume() = default;

    template <typename T>
    static Volume fromImage(typename Image3<T>::Pointer image, VolumeInfo info = {}) {
        Volume v;
        v.image_ = image;
        v.type_ = pixelTypeOf<T>();
        v.info_ = std::move(info);
        return v;
    }

    // Allocates a zero-filled volume of the given geometry.
    template <typename T>
    static Volume allocate(const Geometry& geometry, VolumeInfo info = {}) {
        auto image = Image3<T>::New();
        image->SetRegions(toItkRegion(geometry));
        image->Allocate(true);
        applyGeometry(geometry, *image);
        return fromImage<T>(image, std::move(info));
    }

    // Like allocate(), but the voxels are left uninitialised: for callers that write every voxel
    // (decoders, casts). Saves a pass over the whole buffer (e.g. 150 MB of memset and page
    // faults for a 512x512x300 int16 CT before decoding starts); the pages are then first touched
    // by the threads that fill them.
    template <typename T>
    static Volume allocateUninitialized(const Geometry& geometry, VolumeInfo info = {}) {
        auto image = Image3<T>::New();
        image->SetRegions(toItkRegion(geometry));
        image->Allocate(false);
        applyGeometry(geometry, *image);
        return fromImage<T>(image, std::move(info));
    }

    bool empty() const { return image_.IsNull(); }
    PixelType pixelType() const { return type_; }
    Geometry geometry() const;
    const VolumeInfo& info() const { return info_; }
    VolumeInfo& info() { return info_; }

    // Typed access; nullptr when the volume holds another pixel type.
    template <typename T>
    typename Image3<T>::Pointer image() const {
        if (type_ != pixelTypeOf<T>()) return nullptr;
        return static_cast<Image3<T>*>(image_.GetPointer());
    }
    template <typename T>
    T* data() const {
        auto img = image<T>();
        return img ? img->GetBufferPointer() : nullptr;
    }
    const void* rawData() const;
    itk::ImageBase<3>* base() const { return image_.GetPointer(); }

    // Converts (copies) to another pixel type; values are static_cast (no scaling).
    Volume castTo(PixelType type) const;

    static itk::ImageRegion<3> toItkRegion(const Geometry& g);
    static void applyGeometry(const Geometry& g, itk::ImageBase<3>& image);
    static Geometry geometryOf(const itk::ImageBase<3>& image);

  private:
    itk::ImageBase<3>::Pointer image_;
    PixelType type_ = PixelType::kFloat32;
    VolumeInfo info_;
};

// Calls fn(T* data) with the volume's typed buffer; returns what fn returns.
template <typename Fn>
decltype(auto) visitPixels(const Volume& v, Fn&& fn) {
    switch (v.pixelType()) {
        case PixelType::kUInt8:
            return fn(v.data<uint8_t>());
        case PixelType::kInt8:
            return fn(v.data<int8_t>());
        case PixelType::kUInt16:
            return fn(v.data<uint16_t>());
        case PixelType::kInt16:
            return fn(v.data<int16_t>());
        case PixelType::kUInt32:
            return fn(v.data<uint32_t>());
        case PixelType::kInt32:
            return fn(v.data<int32_t>());
        case PixelType::kFloat32:
            return fn(v.data<float>());
        case PixelType::kFloat64:
            return fn(v.data<double>());
    }
    return fn(v.data<float>());
}

Volume cloneVolume(const Volume& v);

}  // namespace voxseg
