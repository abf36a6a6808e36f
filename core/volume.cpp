#include "core/volume.h"

#include <itkDataObject.h>
#include <itkObject.h>

#include <cstring>

namespace voxseg {

namespace {
// ITK 5.2 creates its global flags (Object::GlobalWarningDisplay, DataObject::
// GlobalReleaseDataFlag) on first use without a lock: two threads reading one first at the same
// time (voxseg batch's loaders) each allocate it and one is lost (LeakSanitizer saw 1 byte from
// itk::Singleton<bool>, BatchCrash test under ASan). Created here, on the thread that runs the
// static initialisers, before any other thread exists.
const bool kItkGlobalsCreated = [] {
    itk::Object::GetGlobalWarningDisplay();
    itk::DataObject::GetGlobalReleaseDataFlag();
    return true;
}();
}  // namespace

const char* pixelTypeName(PixelType type) {
    switch (type) {
        case PixelType::kUInt8:
            return "uint8";
        case PixelType::kInt8:
            return "int8";
        case PixelType::kUInt16:
            return "uint16";
        case PixelType::kInt16:
            return "int16";
        case PixelType::kUInt32:
            return "uint32";
        case PixelType::kInt32:
            return "int32";
        case PixelType::kFloat32:
            return "float32";
        case PixelType::kFloat64:
            return "float64";
    }
    return "?";
}

size_t pixelTypeSize(PixelType type) {
    switch (type) {
        case PixelType::kUInt8:
        case PixelType::kInt8:
            return 1;
        case PixelType::kUInt16:
        case PixelType::kInt16:
            return 2;
        case PixelType::kUInt32:
        case PixelType::kInt32:
        case PixelType::kFloat32:
            return 4;
        case PixelType::kFloat64:
            return 8;
    }
    return 0;
}

itk::ImageRegion<3> Volume::toItkRegion(const Geometry& g) {
    itk::ImageRegion<3> region;
    for (int i = 0; i < 3; ++i) {
        region.SetIndex(i, 0);
        region.SetSize(i, static_cast<itk::SizeValueType>(g.size[i]));
    }
    return region;
}

void Volume::applyGeometry(const Geometry& g, itk::ImageBase<3>& image) {
    itk::ImageBase<3>::SpacingType spacing;
    itk::ImageBase<3>::PointType origin;
    itk::ImageBase<3>::DirectionType direction;
    for (int r = 0; r < 3; ++r) {
        spacing[r] = g.spacing[r];
        origin[r] = g.origin[r];
        for (int c = 0; c < 3; ++c) direction(r, c) = g.direction[r * 3 + c];
    }
    image.SetSpacing(spacing);
    image.SetOrigin(origin);
    image.SetDirection(direction);
}

Geometry Volume::geometryOf(const itk::ImageBase<3>& image) {
    Geometry g;
    const auto size = image.GetLargestPossibleRegion().GetSize();
    for (int r = 0; r < 3; ++r) {
        g.size[r] = static_cast<int64_t>(size[r]);
        g.spacing[r] = image.GetSpacing()[r];
        g.origin[r] = image.GetOrigin()[r];
        for (int c = 0; c < 3; ++c) g.direction[r * 3 + c] = image.GetDirection()(r, c);
    }
    return g;
}

Geometry Volume::geometry() const { return empty() ? Geometry{} : geometryOf(*image_); }

const void* Volume::rawData() const {
    return empty() ? nullptr
                   : visitPixels(*this, [](auto* p) { return static_cast<const void*>(p); });
}

namespace {
template <typename Dst>
Volume castImpl(const Volume& src) {
    Volume out = Volume::allocateUninitialized<Dst>(src.geometry(), src.info());
    Dst* dst = out.data<Dst>();
    const int64_t n = src.geometry().voxelCount();
    visitPixels(src, [&](auto* s) {
        for (int64_t i = 0; i < n; ++i) dst[i] = static_cast<Dst>(s[i]);
    });
    return out;
}
}  // namespace

Volume Volume::castTo(PixelType type) const {
    switch (type) {
        case PixelType::kUInt8:
            return castImpl<uint8_t>(*this);
        case PixelType::kInt8:
            return castImpl<int8_t>(*this);
        case PixelType::kUInt16:
            return castImpl<uint16_t>(*this);
        case PixelType::kInt16:
            return castImpl<int16_t>(*this);
        case PixelType::kUInt32:
            return castImpl<uint32_t>(*this);
        case PixelType::kInt32:
            return castImpl<int32_t>(*this);
        case PixelType::kFloat32:
            return castImpl<float>(*this);
        case PixelType::kFloat64:
            return castImpl<double>(*this);
    }
    return {};
}

Volume cloneVolume(const Volume& v) { return v.empty() ? Volume{} : v.castTo(v.pixelType()); }

}  // namespace voxseg
