// Keeps docs/guide.md honest: every ```cpp block must be preceded by a line
// naming its source file in backticks (e.g. From
// `examples/guide_snippets/quick_start.cc`:) and must appear verbatim in that
// file (up to one common indentation), which is built (and mostly run) in CI.
// Prints each mismatch and exits 1 if there is any.
//
// Usage: check_guide <repository root> <guide relative to the root>

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

// The first `backticked` path under examples/ on `line`, or "".
std::string SourceNamedOn(const std::string& line) {
  size_t open = line.find("`examples/");
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

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::cerr << "usage: check_guide <repository root> <guide>\n";
    return 2;
  }
  const std::string root = argv[1];
  std::string guide;
  if (!ReadFile(root + "/" + argv[2], &guide)) {
    std::cerr << "cannot read " << argv[2] << "\n";
    return 2;
  }
  std::vector<std::string> lines;
  std::istringstream stream(guide);
  for (std::string line; std::getline(stream, line);) lines.push_back(line);

  int blocks = 0;
  int failures = 0;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (lines[i].rfind("```", 0) != 0) continue;
    const bool is_cpp = lines[i] == "```cpp" || lines[i] == "```c++";
    size_t end = i + 1;
    std::string body;
    for (; end < lines.size() && lines[end].rfind("```", 0) != 0; ++end) {
      body += lines[end] + "\n";
    }
    if (is_cpp) {
      ++blocks;
      size_t previous = i;
      while (previous > 0 && lines[previous - 1].empty()) --previous;
      const std::string source =
          previous > 0 ? SourceNamedOn(lines[previous - 1]) : "";
      std::string text;
      if (source.empty()) {
        std::cerr << argv[2] << ":" << i + 1
                  << ": C++ block without a `examples/...` source line\n";
        ++failures;
      } else if (!ReadFile(root + "/" + source, &text)) {
        std::cerr << argv[2] << ":" << i + 1 << ": cannot read " << source
                  << "\n";
        ++failures;
      } else if (!ContainsIndented(text, body)) {
        std::cerr << argv[2] << ":" << i + 1 << ": block is not verbatim in "
                  << source << ":\n"
                  << body;
        ++failures;
      }
    }
    i = end;  // skip to the closing fence
  }
  std::cout << "check_guide: " << blocks << " C++ blocks, " << failures
            << " out of sync\n";
  return failures == 0 && blocks > 0 ? 0 : 1;
}
