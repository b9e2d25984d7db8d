// Command-line walking shared by the examples (embed, digits): options as
// "--name value" or "--name=value", flags without a value, other arguments
// positional. A usage problem prints "<program>: <message>", then the usage
// text, to stderr and exits with status 2.
#pragma once
#include <cstdlib>
#include <exception>
#include <iostream>
#include <string>

namespace example_cli {

class Args {
 public:
  Args(const char* program, const char* usage, int argc, char** argv)
      : program_(program), usage_(usage), argc_(argc), argv_(argv) {}

  /// Moves to the next argument; false after the last.
  bool next() {
    if (++i_ >= argc_) return false;
    arg_ = argv_[i_];
    value_.clear();
    inline_value_ = false;
    if (auto eq = arg_.find('='); is_option() && eq != std::string::npos) {
      value_ = arg_.substr(eq + 1);
      arg_ = arg_.substr(0, eq);
      inline_value_ = true;
    }
    return true;
  }
  /// The current argument: an option's name (without "=value") or a positional.
  const std::string& arg() const { return arg_; }
  /// Whether the current argument starts with "--".
  bool is_option() const { return arg_.rfind("--", 0) == 0; }
  /// The current option's value ("=value" or the next argument).
  std::string value() {
    if (inline_value_) return value_;
    if (i_ + 1 >= argc_) error(arg_ + " expects a value");
    return argv_[++i_];
  }
  /// For a flag: a usage error when it was given "=value".
  void no_value() const {
    if (inline_value_) error(arg_ + " takes no value");
  }
  /// value() as an integer in [1, max].
  int positive(long max) {
    const std::string text = value();
    try {
      size_t used = 0;
      const long v = std::stol(text, &used);
      if (used == text.size() && v >= 1 && v <= max) return static_cast<int>(v);
    } catch (const std::exception&) {
    }
    error(arg_ + " expects a positive integer, got '" + text + "'");
  }
  /// Prints the usage text to stdout and exits with status 0.
  [[noreturn]] void help() const {
    std::cout << usage_;
    std::exit(0);
  }
  /// Prints "<program>: msg" and the usage text to stderr; exits with status 2.
  [[noreturn]] void error(const std::string& msg) const { usage_error(program_, usage_, msg); }

  [[noreturn]] static void usage_error(const char* program, const char* usage, const std::string& msg) {
    std::cerr << program << ": " << msg << "\n" << usage;
    std::exit(2);
  }

 private:
  const char* program_;
  const char* usage_;
  int argc_;
  char** argv_;
  int i_ = 0;
  std::string arg_, value_;
  bool inline_value_ = false;
};

}  // namespace example_cli
