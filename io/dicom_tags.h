// Small typed accessors over DCMTK items used by the header readers of io/: missing or malformed
// values come back as the given fallback instead of an OFCondition. Internal to io/.
// Thread safety: reentrant. DCMTK types appear only inside io/.
#pragma once

#include <dcmtk/config/osconfig.h>
#include <dcmtk/dcmdata/dctk.h>

#include <string>
#include <vector>

namespace voxseg::io::tags {

// The value (all components joined with '\'), trimmed of padding; "" when absent. Always
// UTF-8: converted from the SpecificCharacterSet in force (io/dicom_charset.h).
std::string getString(DcmItem* item, const DcmTagKey& tag);
double getDouble(DcmItem* item, const DcmTagKey& tag, unsigned long pos, double fallback);
int getInt(DcmItem* item, const DcmTagKey& tag, int fallback);
// All numeric components of a DS/FD/FL/IS element; empty when absent or unparseable.
std::vector<double> getDoubles(DcmItem* item, const DcmTagKey& tag);
// Item `index` of sequence `tag`, or nullptr.
DcmItem* getItem(DcmItem* item, const DcmTagKey& tag, unsigned long index = 0);
// Element (group, 0xBB00 | element_low) of the private block reserved by `creator`, or a key
// with group 0 when the creator is absent.
DcmTagKey privateTag(DcmItem* item, Uint16 group, const char* creator, Uint8 element_low);
// Raw bytes of an element (any VR, e.g. UN/OB in implicit files); empty when absent.
std::vector<Uint8> getBytes(DcmItem* item, const DcmTagKey& tag);

}  // namespace voxseg::io::tags
