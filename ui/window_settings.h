// What voxseg-viewer remembers between runs, in QSettings (the application's organisation and
// name: "voxseg"/"voxseg-viewer"; the tests set their own, never the user's): the window's
// geometry (maximised or not) and its docks and toolbars, the view layout, the last model folder
// and the Run model options the user changed from their defaults, and the last folders opened
// from and saved to. The options are stored by the option schema's keys
// (pipeline/segment_options_schema.h) as the text the CLI takes, so an option added to the schema
// is remembered without a change here; options the dialog does not show (a per-run override such
// as --ignore-modality) are never kept. Recent files stay with MainWindow ("recent"). GUI thread
// only.
#pragma once

#include "pipeline/segment.h"

#include <QString>

#include <utility>
#include <vector>

class QMainWindow;

namespace voxseg::ui::window_settings {

// Saves geometry, window state (docks, toolbars) and the layout name ("1x3", "2x2").
void saveWindow(const QMainWindow& window, const QString& layout);
// Restores what saveWindow saved (before the window is shown); false when nothing was saved
// (the first start) or it could not be read.
bool restoreWindow(QMainWindow& window);
// The layout saveWindow saved; `fallback` when none.
QString layout(const QString& fallback);

enum class Folder { kOpen, kSave };
// The folder a file dialog should start in ("" when none is known or it no longer exists).
QString folder(Folder which);
// After opening or saving `path`: a file's folder is kept; for an opened folder (a DICOM study)
// the folder above it, so the next dialog starts among its siblings.
void rememberFolder(Folder which, const QString& path);

QString modelFolder();
// The Run model options remembered, as (flag, text) for RunModelDialog::setValue, in the
// schema's order; options no longer in the schema or no longer shown by the dialog are left out.
std::vector<std::pair<QString, QString>> modelOptions();
// Keeps `folder` and the dialog options of `options` that differ from their defaults (and
// forgets the others).
void rememberModel(const QString& folder, const pipeline::SegmentOptions& options);

}  // namespace voxseg::ui::window_settings
