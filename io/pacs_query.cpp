#include "io/pacs_query.h"

#include <cctype>

namespace voxseg::io {
namespace {

Status checkDate(const std::string& d, const char* which) {
    if (d.empty()) return Status::ok();
    bool digits = d.size() == 8;
    for (char c : d) digits = digits && std::isdigit(static_cast<unsigned char>(c));
    if (!digits)
        return invalidArgument(std::string(which) + " date must be YYYYMMDD (e.g. 20240131)", d);
    return Status::ok();
}

Status checkField(const std::string& v, const char* which) {
    if (v.find('\\') != std::string::npos)
        return invalidArgument(std::string(which) + " must not contain a backslash", v);
    return Status::ok();
}

}  // namespace

Result<PacsMatchKeys> pacsMatchKeys(const PacsStudyQuery& q) {
    VOXSEG_RETURN_IF_ERROR(checkDate(q.date_from, "the from"));
    VOXSEG_RETURN_IF_ERROR(checkDate(q.date_to, "the to"));
    if (!q.date_from.empty() && !q.date_to.empty() && q.date_from > q.date_to)
        return invalidArgument("the date range ends before it starts",
                               q.date_from + "-" + q.date_to);
    VOXSEG_RETURN_IF_ERROR(checkField(q.patient_name, "the patient name"));
    VOXSEG_RETURN_IF_ERROR(checkField(q.patient_id, "the patient ID"));
    VOXSEG_RETURN_IF_ERROR(checkField(q.accession, "the accession number"));
    VOXSEG_RETURN_IF_ERROR(checkField(q.modality, "the modality"));
    PacsMatchKeys k;
    k.patient_name = q.patient_name;
    if (!k.patient_name.empty() && k.patient_name.find_first_of("*?") == std::string::npos)
        k.patient_name += '*';
    k.patient_id = q.patient_id;
    if (!q.date_from.empty() || !q.date_to.empty())
        k.study_date = q.date_from == q.date_to ? q.date_from : q.date_from + "-" + q.date_to;
    k.accession = q.accession;
    k.modality = q.modality;
    return k;
}

}  // namespace voxseg::io
