// kiln: reading a labelled numeric data set from a CSV file.
#pragma once
#include <cstdint>
#include <string>

#include "../tensor/error.h"
#include "../tensor/tensor.h"

namespace kiln {

/// A file that cannot be opened or read, or whose contents are malformed
/// (the message names the path and, for contents, the line).
class IoError : public Error { using Error::Error; };

/// A labelled data set: one row per example.
struct CsvTable {
  /// float32 [rows, columns - 1]: every column but the last.
  Tensor features;
  /// int64 [rows]: the last column, each in [0, num_label_classes).
  Tensor labels;
};

/// Reads a CSV of numbers, one example per line: feature columns, then an
/// integer label column (the UCI digits layout of scikit-learn's
/// `digits.csv.gz`: 64 pixels then the digit). The file may be plain text or
/// gzip-compressed; gzip is recognised by its magic bytes (1f 8b), not by the
/// file name, and inflated with zlib (several concatenated gzip members are
/// read as one stream; anything else after the stream is an error). A UTF-8
/// byte-order mark (EF BB BF) at the start of the text is skipped.
///
/// Fields are separated by commas; spaces around a field and a trailing `\r`
/// (CRLF files) are ignored, and so are empty lines. Every line must have the
/// same number of columns (at least 2). Fields are decimal numbers as C++'s
/// `std::from_chars` reads them; NaN and infinities are refused. A label
/// must be an integer (written `3` or `3.0`).
///
/// Throws IoError (messages start with "read_csv_dataset: <path>") for an
/// empty path, a missing or unreadable file, a corrupt or truncated gzip
/// stream, trailing garbage after it, a file compressed twice, an empty file, a line
/// with a different column count (names the line, the count and the
/// expected count), a field that is not a finite number (line, column and
/// the text, quoted with non-printable bytes as \xNN and cut to 40
/// characters) and a label that is not an integer in [0, num_label_classes)
/// (line and value). Throws ValueError when num_label_classes < 1.
/// Line and column numbers count from 1.
CsvTable read_csv_dataset(const std::string& path, int64_t num_label_classes);

}  // namespace kiln
