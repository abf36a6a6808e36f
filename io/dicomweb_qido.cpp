#include "io/dicomweb_qido.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace voxseg::io {
namespace {

using nlohmann::json;

// Values of `tag` ("00100010") in a DICOM JSON object, as strings (PN: the alphabetic group).
std::vector<std::string> values(const json& item, const char* tag) {
    std::vector<std::string> out;
    const auto it = item.find(tag);
    if (it == item.end() || !it->is_object()) return out;
    const auto v = it->find("Value");
    if (v == it->end() || !v->is_array()) return out;
    for (const auto& e : *v) {
        if (e.is_string())
            out.push_back(e.get<std::string>());
        else if (e.is_number_integer())
            out.push_back(std::to_string(e.get<long long>()));
        else if (e.is_number())
            out.push_back(fmt::format("{}", e.get<double>()));
        else if (e.is_object() && e.contains("Alphabetic") && e["Alphabetic"].is_string())
            out.push_back(e["Alphabetic"].get<std::string>());
    }
    return out;
}

std::string value(const json& item, const char* tag) {
    auto v = values(item, tag);
    return v.empty() ? std::string() : v.front();
}

int intValue(const json& item, const char* tag) {
    const std::string v = value(item, tag);
    try {
        return v.empty() ? 0 : std::stoi(v);
    } catch (const std::exception&) {
        return 0;
    }
}

Result<json> parseArray(const std::string& text, const std::string& subject) {
    if (text.empty()) return json::array();  // 204 No Content: nothing matched
    json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.is_array())
        return corruptData(
            "the QIDO-RS answer is not a DICOM JSON array; check that the URL is "
            "the DICOMweb root (e.g. http://host:8042/dicom-web)",
            subject);
    for (const auto& e : j)
        if (!e.is_object()) return corruptData("a QIDO-RS answer row is not an object", subject);
    return j;
}

constexpr const char* kStudyFields[] = {"00100010", "00100020", "00080020", "00081030",
                                        "00080050", "00080061", "0020000D"};
constexpr const char* kSeriesFields[] = {"00080060", "0008103E", "00200011", "00201209",
                                         "0020000E"};

Result<std::string> get(const HttpEndpoint& server, const std::string& url,
                        const CancelToken& cancel) {
    HttpRequest req;
    req.url = url;
    req.accept = "application/dicom+json";
    req.cancel = cancel;
    VOXSEG_ASSIGN_OR_RETURN(HttpResponse r, httpRequest(server, req));
    if (r.status == 204) return std::string();
    if (r.status != 200)
        return httpStatusError("QIDO-RS " + url, url, r,
                               "check the DICOMweb root URL (e.g. http://host:8042/dicom-web)");
    return std::move(r.body);
}

std::string root(const HttpEndpoint& server) {
    std::string r = server.url;
    while (!r.empty() && r.back() == '/') r.pop_back();
    return r;
}

}  // namespace

Result<std::vector<PacsStudy>> parseQidoStudies(const std::string& text,
                                                const std::string& subject) {
    VOXSEG_ASSIGN_OR_RETURN(json j, parseArray(text, subject));
    std::vector<PacsStudy> out;
    for (const auto& e : j) {
        PacsStudy s;
        s.patient_name = value(e, "00100010");
        s.patient_id = value(e, "00100020");
        s.study_date = value(e, "00080020");
        s.study_description = value(e, "00081030");
        s.accession = value(e, "00080050");
        s.modalities = values(e, "00080061");
        s.study_uid = value(e, "0020000D");
        if (s.study_uid.empty()) continue;  // cannot be retrieved: not a study
        out.push_back(std::move(s));
    }
    return out;
}

Result<std::vector<PacsSeries>> parseQidoSeries(const std::string& text,
                                                const std::string& subject) {
    VOXSEG_ASSIGN_OR_RETURN(json j, parseArray(text, subject));
    std::vector<PacsSeries> out;
    for (const auto& e : j) {
        PacsSeries s;
        s.study_uid = value(e, "0020000D");
        s.series_uid = value(e, "0020000E");
        s.modality = value(e, "00080060");
        s.description = value(e, "0008103E");
        s.number = intValue(e, "00200011");
        s.instances = intValue(e, "00201209");
        if (s.series_uid.empty()) continue;
        out.push_back(std::move(s));
    }
    return out;
}

Result<std::vector<PacsStudy>> qidoStudies(const HttpEndpoint& server, const PacsStudyQuery& query,
                                           const CancelToken& cancel) {
    VOXSEG_ASSIGN_OR_RETURN(PacsMatchKeys k, pacsMatchKeys(query));
    std::string url = root(server) + "/studies?";
    auto param = [&url](const char* name, const std::string& v) {
        // Wildcards and the PN component separator stay as they are: Orthanc's DICOMweb
        // plugin (1.7) does not decode %5E, and finds no "DOE%5EJ*".
        if (!v.empty()) url += std::string(name) + "=" + urlEncode(v, "^*?") + "&";
    };
    param("PatientName", k.patient_name);
    param("PatientID", k.patient_id);
    param("StudyDate", k.study_date);
    param("AccessionNumber", k.accession);
    param("ModalitiesInStudy", k.modality);
    for (const char* f : kStudyFields) url += std::string("includefield=") + f + "&";
    url.pop_back();
    VOXSEG_ASSIGN_OR_RETURN(std::string body, get(server, url, cancel));
    return parseQidoStudies(body, url);
}

Result<std::vector<PacsSeries>> qidoSeries(const HttpEndpoint& server, const std::string& study_uid,
                                           const CancelToken& cancel) {
    std::string url = root(server) + "/studies/" + urlEncode(study_uid) + "/series?";
    for (const char* f : kSeriesFields) url += std::string("includefield=") + f + "&";
    url.pop_back();
    VOXSEG_ASSIGN_OR_RETURN(std::string body, get(server, url, cancel));
    VOXSEG_ASSIGN_OR_RETURN(auto series, parseQidoSeries(body, url));
    for (auto& s : series)
        if (s.study_uid.empty()) s.study_uid = study_uid;
    return series;
}

}  // namespace voxseg::io
