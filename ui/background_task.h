// Running slow work (loading, scanning, inference) off the GUI thread: the work runs on a new
// QThread and its result is handed to `done` on the thread of `context` (the GUI thread) by a
// queued call, so the window never freezes. The caller keeps the returned QThread (it deletes
// itself when finished) to wait for it before `context` is destroyed. Header-only.
#pragma once

#include <QMetaObject>
#include <QObject>
#include <QThread>

#include <functional>
#include <memory>

namespace voxseg::ui {

template <typename R>
QThread* runInBackground(QObject* context, std::function<R()> work, std::function<void(R&)> done) {
    QThread* thread = QThread::create([context, work = std::move(work), done = std::move(done)] {
        auto result = std::make_shared<R>(work());
        QMetaObject::invokeMethod(
            context, [result, done] { done(*result); }, Qt::QueuedConnection);
    });
    QObject::connect(thread, &QThread::finished, thread, &QObject::deleteLater);
    thread->start();
    return thread;
}

}  // namespace voxseg::ui
