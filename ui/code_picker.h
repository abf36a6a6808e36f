// A dialog that picks a segment's category (DICOM CID 7150) and type (CID 7151) from the
// shipped code lists (edit/segment_codes.h): one search field filters both lists by meaning or
// code value as the user types. GUI thread only.
#pragma once

#include "core/coded_concept.h"

#include <QDialog>

class QLineEdit;
class QListWidget;

namespace voxseg::ui {

class CodePicker : public QDialog {
    Q_OBJECT

  public:
    CodePicker(const CodedConcept& category, const CodedConcept& type, QWidget* parent = nullptr);
    void setQuery(const QString& text);
    QLineEdit* searchField() const { return search_; }
    QListWidget* categoryList() const { return categories_; }
    QListWidget* typeList() const { return types_; }
    // The selected codes (the initial ones when nothing else was picked).
    CodedConcept category() const;
    CodedConcept type() const;

  private:
    void refill();

    QLineEdit* search_;
    QListWidget* categories_;
    QListWidget* types_;
    CodedConcept initial_category_, initial_type_;
};

}  // namespace voxseg::ui
