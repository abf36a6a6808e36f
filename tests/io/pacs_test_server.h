// What the PACS client tests (io and viewer) share: the Orthanc started by
// tests/io/pacs_orthanc_test.sh (its ports and AE titles from the environment; the tests skip
// without them), and two small studies written with io/dicom_synth.h, given known patient,
// date, description and accession values, and stored into that Orthanc by C-STORE.
#pragma once

#include "io/dicom_net_move.h"
#include "io/dicom_net_scu.h"
#include "io/dicom_synth.h"
#include "io/http_client.h"
#include "io/pacs_client.h"

#include <dcmtk/config/osconfig.h>
#include <dcmtk/dcmdata/dcdeftag.h>
#include <dcmtk/dcmdata/dcfilefo.h>

#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace voxseg::testing {

struct PacsTestServer {
    io::DicomPeer peer;         // Orthanc's DICOM port
    io::HttpEndpoint dicomweb;  // Orthanc's DICOMweb root
    std::string rest;           // Orthanc's REST root (http://127.0.0.1:port)
    io::MoveDestination self;   // the AE Orthanc knows as a C-MOVE destination
    int http_port = 0;
};

// The server from the environment, or nothing (the test skips: run it through the script).
inline std::optional<PacsTestServer> pacsTestServer() {
    const char* dport = std::getenv("VOXSEG_TEST_ORTHANC_DICOM_PORT");
    const char* hport = std::getenv("VOXSEG_TEST_ORTHANC_HTTP_PORT");
    const char* aet = std::getenv("VOXSEG_TEST_ORTHANC_AET");
    const char* move_aet = std::getenv("VOXSEG_TEST_MOVE_AET");
    const char* move_port = std::getenv("VOXSEG_TEST_MOVE_PORT");
    if (!dport || !hport || !aet || !move_aet || !move_port) return std::nullopt;
    PacsTestServer s;
    s.peer.ae_title = aet;
    s.peer.host = "127.0.0.1";
    s.peer.port = std::atoi(dport);
    s.peer.timeout_seconds = 20;
    s.peer.label = std::string("orthanc (") + aet + "@127.0.0.1:" + dport + ")";
    s.http_port = std::atoi(hport);
    s.rest = std::string("http://127.0.0.1:") + hport;
    s.dicomweb.url = s.rest + "/dicom-web";
    s.dicomweb.timeout_seconds = 20;
    s.self.ae_title = move_aet;
    s.self.port = std::atoi(move_port);
    return s;
}

// One uploaded study of one series.
struct PacsTestStudy {
    std::string patient_name, patient_id, date, description, accession, modality;
    int slices = 0, columns = 0, rows = 0;
    std::string study_uid, series_uid, folder;
    std::vector<std::string> sop_instance_uids;  // sorted
};

inline std::vector<PacsTestStudy> pacsTestStudies() {
    PacsTestStudy a{
        "PACSTEST^ALPHA", "PT-A-001", "20240115", "Abdomen CT", "ACC-1001", "CT", 7, 20, 16};
    PacsTestStudy b{
        "PACSTEST^BETA", "PT-B-002", "20240320", "Head MR", "ACC-2002", "MR", 5, 12, 10};
    return {a, b};
}

// Writes `s` into `folder` (UIDs filled in) and sets its study attributes; false on failure.
inline bool writePacsTestStudy(PacsTestStudy& s, const std::string& folder) {
    io::SynthSeriesSpec spec;
    spec.modality = s.modality;
    spec.columns = s.columns;
    spec.rows = s.rows;
    spec.slices = s.slices;
    spec.patient_name = s.patient_name;
    spec.patient_id = s.patient_id;
    spec.description = s.description + " series";
    auto files = io::writeSynthSeries(spec, folder);
    if (!files.isOk()) return false;
    s.folder = folder;
    s.sop_instance_uids.clear();
    for (const auto& f : *files) {
        DcmFileFormat ff;
        if (ff.loadFile(f.c_str()).bad()) return false;
        DcmDataset* ds = ff.getDataset();
        ds->putAndInsertString(DCM_StudyDate, s.date.c_str());
        ds->putAndInsertString(DCM_StudyDescription, s.description.c_str());
        ds->putAndInsertString(DCM_AccessionNumber, s.accession.c_str());
        OFString v;
        ds->findAndGetOFString(DCM_StudyInstanceUID, v);
        s.study_uid = v.c_str();
        ds->findAndGetOFString(DCM_SeriesInstanceUID, v);
        s.series_uid = v.c_str();
        ds->findAndGetOFString(DCM_SOPInstanceUID, v);
        s.sop_instance_uids.push_back(v.c_str());
        if (ff.saveFile(f.c_str(), EXS_LittleEndianExplicit).bad()) return false;
    }
    std::sort(s.sop_instance_uids.begin(), s.sop_instance_uids.end());
    return true;
}

// The files of `folder` (one series), as C-STORE takes them.
inline std::vector<std::string> filesIn(const std::string& folder) {
    std::vector<std::string> files;
    for (const auto& e : std::filesystem::directory_iterator(folder))
        files.push_back(e.path().string());
    return files;
}

// The test Orthanc as the viewer's DICOM server entry named `name` (C-FIND / C-MOVE).
inline io::PacsServer pacsDicomServer(const PacsTestServer& server, const std::string& name) {
    io::PacsServer s;
    s.name = name;
    s.protocol = io::PacsProtocol::kDicom;
    s.peer = server.peer;
    s.self = server.self;
    return s;
}

// Orthanc's number of instances (GET /statistics), -1 when it does not answer.
inline int orthancInstanceCount(const PacsTestServer& server) {
    io::HttpEndpoint e;
    io::HttpRequest req;
    req.url = server.rest + "/statistics";
    auto r = io::httpRequest(e, req);
    if (!r.isOk() || r->status != 200) return -1;
    const auto at = r->body.find("\"CountInstances\"");
    if (at == std::string::npos) return -1;
    return std::atoi(r->body.c_str() + r->body.find(':', at) + 1);
}

}  // namespace voxseg::testing
