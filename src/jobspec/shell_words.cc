#include <string>

#include "starforge/jobspec/parse.h"

namespace starforge::jobspec {

namespace {

// POSIX shell quoting (XCU 2.2) without expansions, operators or comments.
class ShellWordSplitter {
 public:
  explicit ShellWordSplitter(std::string_view line) : line_(line) {}

  // Returns an error message, or "" on success.
  std::string Run() {
    while (pos_ < line_.size()) {
      const char c = line_[pos_];
      std::string error;
      if (c == ' ' || c == '\t' || c == '\n') {
        EndWord();
        ++pos_;
      } else if (c == '\\') {
        error = Backslash();
      } else if (c == '\'') {
        error = SingleQuoted();
      } else if (c == '"') {
        error = DoubleQuoted();
      } else {
        Append(c);
        ++pos_;
      }
      if (!error.empty()) return error;
    }
    EndWord();
    return "";
  }

  std::vector<std::string> TakeWords() { return std::move(words_); }

 private:
  void Append(char c) {
    word_ += c;
    in_word_ = true;
  }

  void EndWord() {
    if (in_word_) words_.push_back(std::move(word_));
    word_.clear();
    in_word_ = false;
  }

  std::string Backslash() {
    if (pos_ + 1 >= line_.size()) return "trailing backslash (nothing left to escape)";
    // Backslash-newline continues the line: both characters vanish.
    if (line_[pos_ + 1] != '\n') Append(line_[pos_ + 1]);
    pos_ += 2;
    return "";
  }

  std::string SingleQuoted() {
    const size_t end = line_.find('\'', pos_ + 1);
    if (end == std::string_view::npos) return "unterminated single quote";
    word_.append(line_.substr(pos_ + 1, end - pos_ - 1));
    in_word_ = true;
    pos_ = end + 1;
    return "";
  }

  std::string DoubleQuoted() {
    in_word_ = true;
    for (++pos_; pos_ < line_.size(); ++pos_) {
      const char c = line_[pos_];
      if (c == '"') {
        ++pos_;
        return "";
      }
      if (c == '\\' && pos_ + 1 < line_.size() && IsDoubleQuoteEscapable(line_[pos_ + 1])) {
        ++pos_;
        if (line_[pos_] != '\n') word_ += line_[pos_];
      } else {
        word_ += c;
      }
    }
    return "unterminated double quote";
  }

  static bool IsDoubleQuoteEscapable(char c) {
    return c == '$' || c == '`' || c == '"' || c == '\\' || c == '\n';
  }

  std::string_view line_;
  size_t pos_ = 0;
  std::string word_;
  bool in_word_ = false;
  std::vector<std::string> words_;
};

}  // namespace

StatusOr<std::vector<std::string>> SplitShellWords(std::string_view line) {
  ShellWordSplitter splitter(line);
  std::string problem = splitter.Run();
  if (!problem.empty()) return Status::Invalid(std::move(problem));
  return splitter.TakeWords();
}

}  // namespace starforge::jobspec
