// GoogleTest main for the viewer tests: one QApplication for the whole run, on the offscreen
// platform unless QT_QPA_PLATFORM says otherwise (e.g. xcb under xvfb-run for the OpenGL view).
// QSettings go to a test location (QStandardPaths test mode), never the user's.
#include <gtest/gtest.h>

#include <QApplication>
#include <QStandardPaths>

int main(int argc, char** argv) {
    if (qEnvironmentVariableIsEmpty("QT_QPA_PLATFORM")) qputenv("QT_QPA_PLATFORM", "offscreen");
    QStandardPaths::setTestModeEnabled(true);
    QApplication app(argc, argv);
    QApplication::setOrganizationName("voxseg-test");
    QApplication::setApplicationName("voxseg-viewer-test");
    ::testing::InitGoogleTest(&argc, argv);
    return RUN_ALL_TESTS();
}
