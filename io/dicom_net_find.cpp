#include "io/dicom_net_find.h"

#include "io/dicom_charset.h"
#include "io/dicom_net_scu_setup.h"

#include <dcmtk/dcmdata/dcdeftag.h>
#include <dcmtk/dcmdata/dcuid.h>
#include <fmt/format.h>

#include <functional>
#include <memory>

namespace voxseg::io {
namespace {

bool isAscii(const std::string& s) {
    for (unsigned char c : s)
        if (c > 0x7F) return false;
    return true;
}

// Runs one C-FIND with `keys` and hands each matching data set to `row`.
Status find(const DicomPeer& peer, const std::string& calling_ae, DcmDataset& keys,
            const std::function<void(DcmDataset&)>& row) {
    const std::string& who = peer.label;
    Scu scu;
    setUpScu(scu, peer, calling_ae);
    OFList<OFString> xfers;
    xfers.push_back(UID_LittleEndianExplicitTransferSyntax);
    xfers.push_back(UID_LittleEndianImplicitTransferSyntax);
    scu.addPresentationContext(UID_FINDStudyRootQueryRetrieveInformationModel, xfers);
    DcmTlsLayerPtr tls;
    VOXSEG_RETURN_IF_ERROR(openAssociation(scu, peer, calling_ae, tls));
    const T_ASC_PresentationContextID pc =
        scu.findPresentationContextID(UID_FINDStudyRootQueryRetrieveInformationModel, "");
    if (pc == 0) {
        scu.abortAssociation();
        return unsupported("the peer does not accept Study Root C-FIND queries", who);
    }
    OFList<QRResponse*> responses;
    const OFCondition c = scu.sendFINDRequest(pc, &keys, &responses);
    Status result = Status::ok();
    if (c.bad()) result = ioError(std::string("C-FIND failed: ") + c.text(), who);
    for (QRResponse* r : responses) {
        if (result.isOk() && r->m_status != 0x0000 && r->m_status != 0xFF00 &&
            r->m_status != 0xFF01)
            result = ioError(
                fmt::format("C-FIND answered status 0x{:04X}{}", r->m_status,
                            r->m_status == 0xA700 ? " (out of resources: narrow the search)" : ""),
                who);
        if (result.isOk() && r->m_dataset && (r->m_status & 0xFF00) == 0xFF00) row(*r->m_dataset);
        delete r;
    }
    if (result.isOk())
        scu.releaseAssociation();
    else
        scu.abortAssociation();
    return result;
}

std::string get(DcmDataset& ds, const DcmTagKey& tag) { return charset::getUtf8(&ds, tag); }

int getInt(DcmDataset& ds, const DcmTagKey& tag) {
    try {
        const std::string v = get(ds, tag);
        return v.empty() ? 0 : std::stoi(v);
    } catch (const std::exception&) {
        return 0;
    }
}

std::vector<std::string> splitValues(const std::string& v) {
    std::vector<std::string> out;
    size_t start = 0;
    while (start <= v.size() && !v.empty()) {
        const size_t end = v.find('\\', start);
        std::string part = v.substr(start, end == std::string::npos ? end : end - start);
        while (!part.empty() && part.back() == ' ') part.pop_back();
        if (!part.empty()) out.push_back(part);
        if (end == std::string::npos) break;
        start = end + 1;
    }
    return out;
}

}  // namespace

Result<std::vector<PacsStudy>> findStudies(const DicomPeer& peer, const std::string& calling_ae,
                                           const PacsStudyQuery& query) {
    VOXSEG_ASSIGN_OR_RETURN(PacsMatchKeys k, pacsMatchKeys(query));
    DcmDataset keys;
    const bool utf8 = !isAscii(k.patient_name) || !isAscii(k.patient_id) || !isAscii(k.accession);
    if (utf8) keys.putAndInsertString(DCM_SpecificCharacterSet, "ISO_IR 192");
    keys.putAndInsertString(DCM_QueryRetrieveLevel, "STUDY");
    keys.putAndInsertString(DCM_PatientName, k.patient_name.c_str());
    keys.putAndInsertString(DCM_PatientID, k.patient_id.c_str());
    keys.putAndInsertString(DCM_StudyDate, k.study_date.c_str());
    keys.putAndInsertString(DCM_StudyDescription, "");
    keys.putAndInsertString(DCM_AccessionNumber, k.accession.c_str());
    keys.putAndInsertString(DCM_ModalitiesInStudy, k.modality.c_str());
    keys.putAndInsertString(DCM_StudyInstanceUID, "");
    std::vector<PacsStudy> out;
    VOXSEG_RETURN_IF_ERROR(find(peer, calling_ae, keys, [&out](DcmDataset& ds) {
        PacsStudy s;
        s.patient_name = get(ds, DCM_PatientName);
        s.patient_id = get(ds, DCM_PatientID);
        s.study_date = get(ds, DCM_StudyDate);
        s.study_description = get(ds, DCM_StudyDescription);
        s.accession = get(ds, DCM_AccessionNumber);
        s.modalities = splitValues(get(ds, DCM_ModalitiesInStudy));
        s.study_uid = get(ds, DCM_StudyInstanceUID);
        if (!s.study_uid.empty()) out.push_back(std::move(s));
    }));
    return out;
}

Result<std::vector<PacsSeries>> findSeries(const DicomPeer& peer, const std::string& calling_ae,
                                           const std::string& study_uid) {
    if (study_uid.empty()) return invalidArgument("no study given for the series query");
    DcmDataset keys;
    keys.putAndInsertString(DCM_QueryRetrieveLevel, "SERIES");
    keys.putAndInsertString(DCM_StudyInstanceUID, study_uid.c_str());
    keys.putAndInsertString(DCM_Modality, "");
    keys.putAndInsertString(DCM_SeriesDescription, "");
    keys.putAndInsertString(DCM_SeriesNumber, "");
    keys.putAndInsertString(DCM_NumberOfSeriesRelatedInstances, "");
    keys.putAndInsertString(DCM_SeriesInstanceUID, "");
    std::vector<PacsSeries> out;
    VOXSEG_RETURN_IF_ERROR(find(peer, calling_ae, keys, [&](DcmDataset& ds) {
        PacsSeries s;
        s.study_uid = study_uid;
        s.series_uid = get(ds, DCM_SeriesInstanceUID);
        s.modality = get(ds, DCM_Modality);
        s.description = get(ds, DCM_SeriesDescription);
        s.number = getInt(ds, DCM_SeriesNumber);
        s.instances = getInt(ds, DCM_NumberOfSeriesRelatedInstances);
        if (!s.series_uid.empty()) out.push_back(std::move(s));
    }));
    return out;
}

}  // namespace voxseg::io
