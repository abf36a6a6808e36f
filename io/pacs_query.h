// What a PACS query asks and answers, the same for DIMSE (C-FIND, io/dicom_net_find.h) and
// DICOMweb (QIDO-RS, io/dicomweb_qido.h): the search fields of a study query, and the study and
// series rows with the usual return keys. Strings are UTF-8; dates DICOM DA (YYYYMMDD). Plain
// data: copy freely.
#pragma once

#include "core/progress.h"
#include "core/status.h"

#include <functional>
#include <string>
#include <vector>

namespace voxseg::io {

// Empty fields do not restrict. Names and IDs may hold DICOM wildcards (* and ?); a patient name
// without any gets a trailing * (a name is rarely typed in full). Dates are YYYYMMDD; one of the
// two alone is an open range.
struct PacsStudyQuery {
    std::string patient_name;
    std::string patient_id;
    std::string date_from;
    std::string date_to;
    std::string accession;
    std::string modality;  // matched against ModalitiesInStudy
};

struct PacsStudy {
    std::string patient_name;
    std::string patient_id;
    std::string study_date;
    std::string study_description;
    std::string accession;
    std::vector<std::string> modalities;  // ModalitiesInStudy
    std::string study_uid;
};

struct PacsSeries {
    std::string study_uid;
    std::string series_uid;
    std::string modality;
    std::string description;
    int number = 0;     // SeriesNumber, 0 when absent
    int instances = 0;  // NumberOfSeriesRelatedInstances, 0 when the PACS does not say
};

// Checks the query (dates are eight digits, from <= to, no backslash in a field) and returns
// the DICOM matching value of each field: the date range "from-to", the name with its *.
struct PacsMatchKeys {
    std::string patient_name;
    std::string patient_id;
    std::string study_date;
    std::string accession;
    std::string modality;
};
Result<PacsMatchKeys> pacsMatchKeys(const PacsStudyQuery& query);

// A series retrieved into a folder (io/retrieve_folder.h): the folder and its files.
struct RetrievedSeries {
    std::string folder;
    std::vector<std::string> files;
};

// Progress of a retrieve: instances received so far and expected (0 when unknown); called from
// the retrieving thread. The Progress' token cancels the retrieve.
using RetrieveCallback = std::function<void(int received, int expected)>;

}  // namespace voxseg::io
