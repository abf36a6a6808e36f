#include "io/dicom_net_scu.h"

#include "io/dicom_nesting.h"
#include "io/dicom_net_scu_setup.h"

#include <dcmtk/config/osconfig.h>
#include <dcmtk/dcmdata/dcdeftag.h>
#include <dcmtk/dcmdata/dcfilefo.h>
#include <dcmtk/dcmdata/dcuid.h>
#include <dcmtk/dcmnet/scu.h>

#include <fmt/format.h>

#include <map>

namespace voxseg::io {

Result<DicomFileIds> readDicomFileIds(const std::string& path) {
    // Files the node sends are its own outputs or what it received, but DCMTK parses them
    // again here and in sendSTORERequest: refuse what would overflow its stack.
    VOXSEG_RETURN_IF_ERROR(checkDicomNesting(path));
    DcmFileFormat ff;
    OFCondition c = ff.loadFile(path.c_str(), EXS_Unknown, EGL_noChange, 4096, ERM_autoDetect);
    if (c.bad()) return corruptData(std::string("not a readable DICOM file: ") + c.text(), path);
    DicomFileIds ids;
    OFString v;
    if (ff.getMetaInfo()->findAndGetOFString(DCM_MediaStorageSOPClassUID, v).good())
        ids.sop_class_uid = v.c_str();
    if (ff.getMetaInfo()->findAndGetOFString(DCM_MediaStorageSOPInstanceUID, v).good())
        ids.sop_instance_uid = v.c_str();
    if (ff.getMetaInfo()->findAndGetOFString(DCM_TransferSyntaxUID, v).good())
        ids.transfer_syntax_uid = v.c_str();
    if (ids.sop_class_uid.empty() || ids.sop_instance_uid.empty())
        return corruptData("no SOP class or instance UID in the file meta header", path);
    return ids;
}

Status storeFiles(const DicomPeer& peer, const std::string& calling_ae,
                  const std::vector<std::string>& files) {
    const std::string& who = peer.label;
    Scu scu;
    setUpScu(scu, peer, calling_ae);
    std::vector<DicomFileIds> ids;
    std::map<std::string, std::string> classes;  // SOP class -> a transfer syntax it is stored in
    for (const auto& f : files) {
        VOXSEG_ASSIGN_OR_RETURN(DicomFileIds i, readDicomFileIds(f));
        classes.emplace(i.sop_class_uid, i.transfer_syntax_uid);
        ids.push_back(i);
    }
    for (const auto& [sop_class, ts] : classes) {
        OFList<OFString> xfers;
        if (!ts.empty()) xfers.push_back(ts.c_str());
        if (ts != UID_LittleEndianExplicitTransferSyntax)
            xfers.push_back(UID_LittleEndianExplicitTransferSyntax);
        if (ts != UID_LittleEndianImplicitTransferSyntax)
            xfers.push_back(UID_LittleEndianImplicitTransferSyntax);
        scu.addPresentationContext(sop_class.c_str(), xfers);
    }
    DcmTlsLayerPtr tls;
    VOXSEG_RETURN_IF_ERROR(openAssociation(scu, peer, calling_ae, tls));
    Status result = Status::ok();
    for (size_t i = 0; i < files.size() && result.isOk(); ++i) {
        Uint16 status = 0xFFFF;
        const T_ASC_PresentationContextID pc = scu.findAnyPresentationContextID(
            ids[i].sop_class_uid.c_str(), ids[i].transfer_syntax_uid.c_str());
        if (pc == 0) {
            result = unsupported(
                "no accepted presentation context for SOP class " + ids[i].sop_class_uid, who);
            break;
        }
        const OFCondition c =
            scu.sendSTORERequest(pc, OFFilename(files[i].c_str()), nullptr, status);
        if (c.bad())
            result = ioError(std::string("C-STORE failed: ") + c.text(), who);
        else if (status != 0x0000 && (status & 0xF000) != 0xB000)
            result = ioError(fmt::format("C-STORE of {} answered status 0x{:04X}",
                                         ids[i].sop_instance_uid, status),
                             who);
    }
    if (result.isOk())
        scu.releaseAssociation();
    else
        scu.abortAssociation();
    return result;
}

}  // namespace voxseg::io
