// The viewer's log panel: a read-only text view fed by core/log.h. While a LogPanel exists it is
// part of the process-wide log sink (records still reach the previous sink, e.g. stderr);
// records from worker threads are queued to the GUI thread. Messages are already scrubbed of
// patient identifiers by the logger. GUI thread only (the sink itself is thread-safe).
#pragma once

#include "core/log.h"

#include <QPlainTextEdit>

#include <memory>

namespace voxseg::ui {

class LogPanel : public QPlainTextEdit {
    Q_OBJECT

  public:
    explicit LogPanel(QWidget* parent = nullptr);
    ~LogPanel() override;

    // Lines shown so far (for tests).
    int lineCount() const { return document()->blockCount(); }

  public slots:
    void appendRecord(int level, const QString& component, const QString& message);

  private:
    std::shared_ptr<log::Sink> previous_;
    std::shared_ptr<log::Sink> sink_;
};

}  // namespace voxseg::ui
