// kiln: reading a labelled numeric data set from a CSV file.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

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
  /// The header row's fields (quotes removed), one per column, the label
  /// column's last; empty when the file was read without a header row.
  std::vector<std::string> column_names;
};

/// What the first non-empty line of a CSV file is.
enum class CsvHeader : uint8_t {
  /// Data, like every line (the default: a text field there is an error).
  none,
  /// A header row: skipped as data, its fields become column_names. It must
  /// have as many fields as the data lines.
  skip,
  /// A header row when some field of it is not a number while every field
  /// of the next non-empty line is (or no line follows); otherwise data.
  /// A header of numbers only (`"1","2"` too: quotes are removed before a
  /// field is read) is therefore taken as data: use `skip` for such files.
  detect,
};

/// Options of read_csv_dataset.
struct CsvOptions {
  CsvHeader header = CsvHeader::none;
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
/// (CRLF files) are ignored, and so are empty lines. A field may be quoted
/// as RFC 4180 has it (`"a, b"`, `""` for a quote inside), on one line; a
/// quote later in an unquoted field is an ordinary character. Every line
/// must have the same number of columns (at least 2). Fields are decimal
/// numbers as C++'s `std::from_chars` reads them (quoted or not); NaN and
/// infinities are refused. A label must be an integer (written `3` or `3.0`).
///
/// A header row is read only when `options.header` asks for it (CsvHeader:
/// `skip` or `detect`); by default the first line is data. A
/// file that holds a header row and no data lines is an error, as an empty
/// file is: a data set without examples is never what the caller wants.
///
/// Throws IoError (messages start with "read_csv_dataset: <path>") for an
/// empty path, a missing or unreadable file, a corrupt or truncated gzip
/// stream, trailing garbage after it, a file compressed twice, an empty file
/// or one with only a header row, a quoted field without its closing quote
/// or with text after it (line and column), a line
/// with a different column count (names the line, the count and the
/// expected count), a field that is not a finite number (line, column and
/// the text, quoted with non-printable bytes as \xNN and cut to 40
/// characters) and a label that is not an integer in [0, num_label_classes)
/// (line and value). Throws ValueError when num_label_classes < 1.
/// Line and column numbers count from 1.
CsvTable read_csv_dataset(const std::string& path, int64_t num_label_classes, const CsvOptions& options = {});

}  // namespace kiln
