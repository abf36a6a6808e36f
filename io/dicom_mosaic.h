// Siemens MOSAIC images: one file holds a whole volume, its slices tiled in a square grid.
// readMosaicInfo() finds NumberOfImagesInMosaic (CSA image header, else (0019,xx0A)) and the CSA
// SliceNormalVector; expandMosaic() turns the file into one FrameHeader per tile, with each
// tile's ImagePositionPatient corrected from the mosaic's top-left corner to the tile's own
// (as dcm2niix does) and slices placed along SliceNormalVector. Internal to io/; reentrant.
#pragma once

#include "io/dicom_header.h"

#include <dcmtk/config/osconfig.h>
#include <dcmtk/dcmdata/dctk.h>

#include <string>
#include <vector>

namespace voxseg::io {

struct MosaicInfo {
    bool is_mosaic = false;  // ImageType says MOSAIC
    int images = 0;          // NumberOfImagesInMosaic; 0 when not found
    bool has_normal = false;
    Vec3 slice_normal{0, 0, 1};
};

MosaicInfo readMosaicInfo(DcmDataset* ds, const FrameHeader& base);

// Parses a Siemens CSA header ("SV10" or the older unlabelled format): the values of `name`.
std::vector<std::string> csaValues(const std::vector<Uint8>& csa, const std::string& name);

// Empty with `error` set when the mosaic cannot be unpacked.
std::vector<FrameHeader> expandMosaic(const FrameHeader& base, const MosaicInfo& info,
                                      std::string& error);

}  // namespace voxseg::io
