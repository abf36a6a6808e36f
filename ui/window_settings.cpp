#include "ui/window_settings.h"

#include "pipeline/segment_options_schema.h"

#include <QDir>
#include <QFileInfo>
#include <QMainWindow>
#include <QSettings>

namespace voxseg::ui::window_settings {
namespace {

// Bumped when the docks or toolbars change so much that an old state would misplace them:
// QMainWindow::restoreState refuses a state saved under another version.
constexpr int kStateVersion = 1;
constexpr const char* kOptionsGroup = "run_model/options";

const char* folderKey(Folder which) {
    return which == Folder::kOpen ? "folders/open" : "folders/save";
}

}  // namespace

void saveWindow(const QMainWindow& window, const QString& layout) {
    QSettings s;
    s.setValue("window/geometry", window.saveGeometry());
    s.setValue("window/state", window.saveState(kStateVersion));
    s.setValue("window/layout", layout);
}

bool restoreWindow(QMainWindow& window) {
    QSettings s;
    const QByteArray geometry = s.value("window/geometry").toByteArray();
    if (geometry.isEmpty() || !window.restoreGeometry(geometry)) return false;
    window.restoreState(s.value("window/state").toByteArray(), kStateVersion);
    return true;
}

QString layout(const QString& fallback) {
    return QSettings().value("window/layout", fallback).toString();
}

QString folder(Folder which) {
    const QString dir = QSettings().value(folderKey(which)).toString();
    return !dir.isEmpty() && QFileInfo(dir).isDir() ? dir : QString();
}

void rememberFolder(Folder which, const QString& path) {
    const QFileInfo info(QDir::cleanPath(path));
    if (!info.exists()) return;
    QString dir = info.isDir() ? info.absoluteDir().absolutePath() : info.absolutePath();
    if (info.isDir() && info.absoluteDir().isRoot()) dir = info.absoluteFilePath();
    QSettings().setValue(folderKey(which), dir);
}

QString modelFolder() { return QSettings().value("run_model/folder").toString(); }

std::vector<std::pair<QString, QString>> modelOptions() {
    QSettings s;
    s.beginGroup(kOptionsGroup);
    std::vector<std::pair<QString, QString>> options;
    for (const pipeline::SegmentOptionSpec& spec : pipeline::segmentOptionSchema()) {
        const QString key = QString::fromStdString(spec.key);
        if (spec.in_dialog && s.contains(key))
            options.emplace_back(QString::fromStdString(spec.flag), s.value(key).toString());
    }
    return options;
}

void rememberModel(const QString& folder, const pipeline::SegmentOptions& options) {
    QSettings s;
    s.setValue("run_model/folder", folder);
    s.remove(kOptionsGroup);
    s.beginGroup(kOptionsGroup);
    const pipeline::SegmentOptions defaults;
    for (const pipeline::SegmentOptionSpec& spec : pipeline::segmentOptionSchema()) {
        if (!spec.in_dialog || !spec.current) continue;
        const std::string text = spec.current(options);
        if (text != spec.current(defaults))
            s.setValue(QString::fromStdString(spec.key), QString::fromStdString(text));
    }
}

}  // namespace voxseg::ui::window_settings
