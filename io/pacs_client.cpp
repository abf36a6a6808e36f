#include "io/pacs_client.h"

#include "io/dicom_net_find.h"
#include "io/dicomweb_qido.h"
#include "io/dicomweb_stow.h"
#include "io/dicomweb_wado.h"

#include <fmt/format.h>

namespace voxseg::io {
namespace {

// The server with its peer label filled in.
PacsServer labelled(PacsServer s) {
    s.peer.label = pacsServerLabel(s);
    return s;
}

std::string webRoot(const PacsServer& s) {
    std::string r = s.web.url;
    while (!r.empty() && r.back() == '/') r.pop_back();
    return r;
}

Status checkServer(const PacsServer& s) {
    if (s.protocol == PacsProtocol::kDicomWeb) {
        if (s.web.url.rfind("http://", 0) != 0 && s.web.url.rfind("https://", 0) != 0)
            return invalidArgument(
                "the DICOMweb URL must start with http:// or https:// (e.g. "
                "http://pacs:8042/dicom-web)",
                pacsServerLabel(s));
        return Status::ok();
    }
    if (s.peer.ae_title.empty() || s.peer.host.empty() || s.peer.port <= 0 || s.peer.port > 65535 ||
        s.self.ae_title.empty())
        return invalidArgument(
            "the DICOM server needs its AE title, host and port (1-65535) "
            "and this viewer's AE title",
            pacsServerLabel(s));
    return Status::ok();
}

}  // namespace

std::string pacsServerLabel(const PacsServer& s) {
    if (s.protocol == PacsProtocol::kDicomWeb) return fmt::format("{} ({})", s.name, s.web.url);
    return fmt::format("{} ({}@{}:{})", s.name, s.peer.ae_title, s.peer.host, s.peer.port);
}

Result<std::vector<PacsStudy>> pacsFindStudies(const PacsServer& server,
                                               const PacsStudyQuery& query,
                                               const CancelToken& cancel) {
    VOXSEG_RETURN_IF_ERROR(checkServer(server));
    if (server.protocol == PacsProtocol::kDicomWeb) return qidoStudies(server.web, query, cancel);
    const PacsServer s = labelled(server);
    return findStudies(s.peer, s.self.ae_title, query);
}

Result<std::vector<PacsSeries>> pacsFindSeries(const PacsServer& server,
                                               const std::string& study_uid,
                                               const CancelToken& cancel) {
    VOXSEG_RETURN_IF_ERROR(checkServer(server));
    if (server.protocol == PacsProtocol::kDicomWeb)
        return qidoSeries(server.web, study_uid, cancel);
    const PacsServer s = labelled(server);
    return findSeries(s.peer, s.self.ae_title, study_uid);
}

Result<RetrievedSeries> pacsRetrieveSeries(const PacsServer& server, const PacsSeries& series,
                                           const std::string& target_folder,
                                           const RetrieveCallback& progress,
                                           const CancelToken& cancel) {
    VOXSEG_RETURN_IF_ERROR(checkServer(server));
    if (server.protocol == PacsProtocol::kDicomWeb)
        return wadoRetrieveSeries(server.web, series.study_uid, series.series_uid, target_folder,
                                  series.instances, progress, cancel);
    const PacsServer s = labelled(server);
    return moveSeries(s.peer, s.self, series.study_uid, series.series_uid, target_folder,
                      series.instances, progress, cancel);
}

Status pacsSendFiles(const PacsServer& server, const std::vector<std::string>& files) {
    VOXSEG_RETURN_IF_ERROR(checkServer(server));
    if (server.protocol == PacsProtocol::kDicomWeb)
        return stowFiles(server.web, webRoot(server) + "/studies", files);
    const PacsServer s = labelled(server);
    return storeFiles(s.peer, s.self.ae_title, files);
}

}  // namespace voxseg::io
