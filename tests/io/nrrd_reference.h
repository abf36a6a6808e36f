// The reference for voxseg's NRRD reading (io/nrrd_data.h): what ITK's own reader makes of the
// same file, NrrdIO reading the data too. Shared by nrrd_data_test and nrrd_data_data_test.
#pragma once

#include "core/volume.h"
#include "io/image_io.h"

#include <gtest/gtest.h>
#include <itkImageFileReader.h>
#include <itkNrrdImageIO.h>

#include <string>

namespace voxseg::io {

// What ITK's own NRRD reader (NrrdIO for the data too) makes of `path`, as doubles.
inline Image3<double>::Pointer readWithItk(const std::string& path) {
    auto reader = itk::ImageFileReader<Image3<double>>::New();
    reader->SetFileName(path);
    reader->SetImageIO(itk::NrrdImageIO::New());
    reader->Update();
    return reader->GetOutput();
}

// voxseg reads raw and gzip data itself into the image ITK's header reading describes: the
// result must be ITK's, geometry bit for bit and every value.
inline void expectSameAsItk(const std::string& path, PixelType type) {
    SCOPED_TRACE(path);
    auto v = readImage(path);
    ASSERT_TRUE(v.isOk()) << v.status().toString();
    EXPECT_EQ(v->pixelType(), type);
    const auto itk = readWithItk(path);
    const Geometry g = v->geometry(), want = Volume::geometryOf(*itk);
    EXPECT_EQ(g.size, want.size);
    EXPECT_EQ(g.spacing, want.spacing);
    EXPECT_EQ(g.origin, want.origin);
    EXPECT_EQ(g.direction, want.direction);
    const Volume d = v->castTo(PixelType::kFloat64);
    const double* got = d.data<double>();
    for (int64_t i = 0; i < g.voxelCount(); ++i)
        ASSERT_EQ(got[i], itk->GetBufferPointer()[i]) << "voxel " << i;
}

}  // namespace voxseg::io
