// GoogleTest main for the viewer tests: one QApplication for the whole run, on the offscreen
// platform unless QT_QPA_PLATFORM says otherwise (e.g. xcb under xvfb-run for the OpenGL view).
// QSettings and the recovery folder go to a test location (QStandardPaths test mode), never the
// user's, and to one of this process's own: ctest runs several test_ui processes at once, and a
// shared settings file let one process's recent files show up in another's (CI failed on it).
// A child test process (the crash test) inherits its parent's profile through the environment.
// Each test starts from empty settings (the window remembers layout, geometry, folders and model
// options: one test's must not become the next one's start); a child keeps its parent's.
#include <gtest/gtest.h>

#include <QApplication>
#include <QDir>
#include <QFile>
#include <QSettings>
#include <QStandardPaths>

#include <unistd.h>

namespace {

class FreshSettings : public ::testing::EmptyTestEventListener {
    void OnTestStart(const ::testing::TestInfo&) override { QSettings().clear(); }
};

}  // namespace

int main(int argc, char** argv) {
    if (qEnvironmentVariableIsEmpty("QT_QPA_PLATFORM")) qputenv("QT_QPA_PLATFORM", "offscreen");
    const bool own_profile = qEnvironmentVariableIsEmpty("VOXSEG_UI_TEST_PROFILE");
    if (own_profile) qputenv("VOXSEG_UI_TEST_PROFILE", QByteArray::number(::getpid()));
    QStandardPaths::setTestModeEnabled(true);
    QApplication app(argc, argv);
    QApplication::setOrganizationName("voxseg-test");
    QApplication::setApplicationName("voxseg-viewer-test-" +
                                     qEnvironmentVariable("VOXSEG_UI_TEST_PROFILE"));
    ::testing::InitGoogleTest(&argc, argv);
    if (own_profile) ::testing::UnitTest::GetInstance()->listeners().Append(new FreshSettings);
    const int rc = RUN_ALL_TESTS();
    if (own_profile) {
        const QString settings = QSettings().fileName();
        QFile::remove(settings);
        QDir(QStandardPaths::writableLocation(QStandardPaths::AppDataLocation)).removeRecursively();
        QDir(QStandardPaths::writableLocation(QStandardPaths::CacheLocation)).removeRecursively();
    }
    return rc;
}
