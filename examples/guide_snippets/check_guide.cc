// Keeps the docs honest. In every document given:
//  * every ```cpp block must be preceded by a line naming its source file in
//    backticks (e.g. From `examples/guide_snippets/quick_start.cc`:) and must
//    appear verbatim in that file (up to one common indentation), which is
//    built (and mostly run) by the test suite;
//  * a ```cmake block preceded by such a line must appear verbatim in the
//    file it names (a CMake file the test suite configures and builds, e.g.
//    the install consumer's); one without it is a command-line fragment;
//  * sources live under examples/ or tests/;
//  * no line, in prose or in any fenced block, may hold a placeholder where
//    text or code should be: `<<` directly followed by a capital letter (as
//    in `<<SNIP file | from | to>>`), or the words TODO, TBD, FIXME or XXX.
// Prints each problem with its file and line and exits 1 if there is any.
//
// Usage: check_guide <repository root> <document relative to the root>...

#include <cctype>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

namespace {

bool ReadFile(const std::string& path, std::string* text) {
  std::ifstream in(path);
  if (!in) return false;
  std::stringstream buffer;
  buffer << in.rdbuf();
  *text = buffer.str();
  return true;
}

// The first `backticked` path under examples/ or tests/ on `line`, or "".
std::string SourceNamedOn(const std::string& line) {
  size_t open = line.find("`examples/");
  if (open == std::string::npos) open = line.find("`tests/");
  if (open == std::string::npos) return "";
  size_t close = line.find('`', open + 1);
  if (close == std::string::npos) return "";
  return line.substr(open + 1, close - open - 1);
}

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream stream(text);
  for (std::string line; std::getline(stream, line);) lines.push_back(line);
  return lines;
}

// True when `block` equals consecutive lines of `text` with one common
// indentation removed (the guide dedents code quoted from inside a class).
bool ContainsIndented(const std::string& text, const std::string& block) {
  const std::vector<std::string> file = Lines(text);
  const std::vector<std::string> quoted = Lines(block);
  if (quoted.empty()) return false;
  for (size_t start = 0; start + quoted.size() <= file.size(); ++start) {
    const std::string& first = file[start];
    if (first.size() < quoted[0].size()) continue;
    const size_t indent = first.size() - quoted[0].size();
    if (first.compare(indent, std::string::npos, quoted[0]) != 0 ||
        first.find_first_not_of(' ') < indent) {
      continue;
    }
    bool same = true;
    for (size_t k = 1; k < quoted.size() && same; ++k) {
      const std::string& line = file[start + k];
      same = quoted[k].empty()
                 ? line.find_first_not_of(' ') == std::string::npos
                 : line == std::string(indent, ' ') + quoted[k];
    }
    if (same) return true;
  }
  return false;
}

bool IsWordChar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_';
}

// True when `word` occurs in `line` as a whole word.
bool HasWord(const std::string& line, const std::string& word) {
  for (size_t at = line.find(word); at != std::string::npos;
       at = line.find(word, at + 1)) {
    const bool starts = at == 0 || !IsWordChar(line[at - 1]);
    const size_t after = at + word.size();
    const bool ends = after == line.size() || !IsWordChar(line[after]);
    if (starts && ends) return true;
  }
  return false;
}

// What makes `line` a placeholder, or "" when it is none. `a << b` (with a
// space, as C++ and prose write a shift) is not one; `<<SNIP` is.
std::string PlaceholderOn(const std::string& line) {
  for (size_t at = line.find("<<"); at != std::string::npos;
       at = line.find("<<", at + 1)) {
    if (at + 2 < line.size() &&
        std::isupper(static_cast<unsigned char>(line[at + 2])) != 0) {
      return "\"<<" + std::string(1, line[at + 2]) + "...\"";
    }
  }
  for (const char* word : {"TODO", "TBD", "FIXME", "XXX"}) {
    if (HasWord(line, word)) return std::string("\"") + word + "\"";
  }
  return "";
}

// Checks one document; adds to the counts and prints each problem.
void CheckDocument(const std::string& root, const std::string& name,
                   int* blocks, int* failures, int* placeholders) {
  std::string doc;
  if (!ReadFile(root + "/" + name, &doc)) {
    std::cerr << "cannot read " << name << "\n";
    ++*failures;
    return;
  }
  const std::vector<std::string> lines = Lines(doc);
  for (size_t i = 0; i < lines.size(); ++i) {
    const std::string what = PlaceholderOn(lines[i]);
    if (!what.empty()) {
      std::cerr << name << ":" << i + 1 << ": placeholder " << what << ": "
                << lines[i] << "\n";
      ++*placeholders;
    }
  }
  for (size_t i = 0; i < lines.size(); ++i) {
    if (lines[i].rfind("```", 0) != 0) continue;
    const bool is_cpp = lines[i] == "```cpp" || lines[i] == "```c++";
    size_t end = i + 1;
    std::string body;
    for (; end < lines.size() && lines[end].rfind("```", 0) != 0; ++end) {
      body += lines[end] + "\n";
    }
    size_t previous = i;
    while (previous > 0 && lines[previous - 1].empty()) --previous;
    const std::string source =
        previous > 0 ? SourceNamedOn(lines[previous - 1]) : "";
    const bool is_quoted_cmake = lines[i] == "```cmake" && !source.empty();
    if (is_cpp || is_quoted_cmake) {
      ++*blocks;
      std::string text;
      if (source.empty()) {
        std::cerr << name << ":" << i + 1
                  << ": C++ block without an `examples/...` source line\n";
        ++*failures;
      } else if (!ReadFile(root + "/" + source, &text)) {
        std::cerr << name << ":" << i + 1 << ": cannot read " << source << "\n";
        ++*failures;
      } else if (!ContainsIndented(text, body)) {
        std::cerr << name << ":" << i + 1 << ": block is not verbatim in "
                  << source << ":\n"
                  << body;
        ++*failures;
      }
    }
    i = end;  // skip to the closing fence
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::cerr << "usage: check_guide <repository root> <document>...\n";
    return 2;
  }
  const std::string root = argv[1];
  int blocks = 0;
  int failures = 0;
  int placeholders = 0;
  for (int arg = 2; arg < argc; ++arg) {
    CheckDocument(root, argv[arg], &blocks, &failures, &placeholders);
  }
  std::cout << "check_guide: " << argc - 2 << " document(s), " << blocks
            << " quoted blocks, " << failures << " out of sync, "
            << placeholders << " placeholder(s)\n";
  return failures == 0 && placeholders == 0 && blocks > 0 ? 0 : 1;
}
