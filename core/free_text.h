// The one rule for free text from DICOM (docs/security.md, "Free text"), and its scrubber.
//
// Free text: SeriesDescription, the one free-text element voxseg copies from its inputs
// (StudyDescription, ProtocolName and ImageComments reach no output but the study module a SEG or
// RTSTRUCT must copy). A sender may have typed the patient's name into it, in any form.
// - It is shown only where a person picks a series: `voxseg info` (table and --json), the
//   candidate list that convert/segment/edit print on stderr, and the viewer. There it goes
//   through displayFreeText(): the patient's name in any form, ID and birth date read "[PHI]"
//   unless `voxseg info --show-phi`. The viewer shows it as the DICOM holds it, beside the
//   patient it displays anyway.
// - It is never written to what is kept and copied: logs and error messages (they name a series
//   by index, UID and modality), run.json, statistics, batch journals and summaries, the node's
//   log and audit trail. The node's spool keeps it in series.json for routing, scrubbed
//   (series.json is not encrypted with the instances).
//
// What is scrubbed is what log::registerIdentifier() was given (io/ registers every patient
// name, ID and birth date it reads). A value with letters and a person-name separator ('^', '=',
// ',' or a space) is also a name: log::scrub() (every log record, every audit event) replaces
// its family and given names in either order and any ASCII case, joined by spaces, commas,
// carets, dots or underscores ("John Doe", "DOE JOHN", "Doe, John"); scrubFreeText() also
// replaces each of its words of 3 or more characters standing alone ("Doe abdomen"), which would
// be too eager for logs (a patient named Phantom would redact "ct-phantom"). Thread-safe.
#pragma once

#include <string>
#include <string_view>

namespace voxseg::log {

// log::scrub(text), then every registered name word (3+ characters, whole words, ASCII case
// ignored) replaced by "[PHI]".
std::string scrubFreeText(std::string_view text);

// A free-text description as a series list shows it: as is with `show_phi`, else scrubbed.
std::string displayFreeText(std::string_view text, bool show_phi);

}  // namespace voxseg::log
