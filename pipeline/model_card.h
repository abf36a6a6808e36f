// A model package's card as a reader wants it before a run (issue 39): what the model is, what
// input it is made for, what it must not be used for, its licence and how to cite it, the
// measurements it declares and the volumes it calls plausible: (heading, text) entries in
// reading order, taken from model.json as engine::readModelPackage reads it
// (docs/model-package.md). The viewer's Run model dialog shows them next to the input checks of
// pipeline/input_checks.h; after a run, measurementText words the declared measurements.
// Plain functions, Qt-free; thread-safe.
#pragma once

#include "engine/model/model_package.h"
#include "pipeline/statistics.h"

#include <string>
#include <vector>

namespace voxseg::pipeline {

struct ModelCardEntry {
    std::string heading;  // "Intended input", "Licence", ...
    std::string text;     // one paragraph; lines separated by '\n' where a list is meant
};

// Model (name and version), Description, Intended input, Licence, Attribution, Citation,
// Disclaimer, Measurements, Plausible results: the entries the package has (an empty field is
// left out; a package without a disclaimer gets none invented).
std::vector<ModelCardEntry> modelCard(const engine::ModelPackage& model);

// "MR; head: hippocampus crops; extent 15..90 mm on every axis; spacing 0.6..1.5 mm; crops
// around the structure, not a whole image".
std::string describeIntendedInput(const engine::IntendedInput& in);

// "tiv_ml 1450.2 mL (total intracranial volume ...)".
std::string measurementText(const Measurement& m);

}  // namespace voxseg::pipeline
