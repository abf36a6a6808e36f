#include "ui/log_panel.h"

#include <QMetaObject>
#include <QPointer>
#include <QTime>

#include <mutex>

namespace voxseg::ui {
namespace {

class PanelSink final : public log::Sink {
  public:
    PanelSink(LogPanel* panel, std::shared_ptr<log::Sink> next)
        : panel_(panel), next_(std::move(next)) {}
    void write(const log::Record& r) override {
        if (next_) next_->write(r);
        std::lock_guard lock(mutex_);
        if (!panel_) return;
        const int level = static_cast<int>(r.level);
        const QString component = QString::fromStdString(r.component);
        const QString message = QString::fromStdString(r.message);
        LogPanel* panel = panel_;
        QMetaObject::invokeMethod(
            panel,
            [panel, level, component, message] { panel->appendRecord(level, component, message); },
            Qt::QueuedConnection);
    }
    void detach() {
        std::lock_guard lock(mutex_);
        panel_ = nullptr;
    }

  private:
    std::mutex mutex_;
    LogPanel* panel_;
    std::shared_ptr<log::Sink> next_;
};

}  // namespace

LogPanel::LogPanel(QWidget* parent) : QPlainTextEdit(parent) {
    setObjectName("log_panel");
    setReadOnly(true);
    setMaximumBlockCount(5000);
    setLineWrapMode(QPlainTextEdit::NoWrap);
    // The previous sink keeps receiving records (records logged between the two calls are lost).
    previous_ = log::setSink(nullptr);
    sink_ = std::make_shared<PanelSink>(this, previous_);
    log::setSink(sink_);
}

LogPanel::~LogPanel() {
    static_cast<PanelSink*>(sink_.get())->detach();
    log::setSink(previous_);
}

void LogPanel::appendRecord(int level, const QString& component, const QString& message) {
    const char* name = log::levelName(static_cast<log::Level>(level));
    QString line = QTime::currentTime().toString("HH:mm:ss") + "  " + name;
    if (!component.isEmpty()) line += " [" + component + "]";
    line += "  " + message;
    appendPlainText(line);
}

}  // namespace voxseg::ui
