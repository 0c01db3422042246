// docs/settings.md is what operators read; these tests keep it in step with the table in
// src/config/config.cc so that the two cannot drift apart.
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "starforge/config/config.h"

namespace starforge::config {
namespace {

std::string ReadDocs() {
  std::ifstream in(std::string(STARFORGE_SOURCE_DIR) + "/docs/settings.md");
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// The cells of a Markdown table row, trimmed; "\|" stays a literal '|' inside a cell.
std::vector<std::string> Cells(const std::string& row) {
  std::vector<std::string> cells;
  std::string cell;
  for (size_t i = 1; i < row.size(); ++i) {  // row[0] is the leading '|'
    if (row[i] == '\\' && i + 1 < row.size() && row[i + 1] == '|') {
      cell += '|';
      ++i;
    } else if (row[i] == '|') {
      const size_t first = cell.find_first_not_of(' ');
      const size_t last = cell.find_last_not_of(' ');
      cells.push_back(first == std::string::npos ? "" : cell.substr(first, last - first + 1));
      cell.clear();
    } else {
      cell += row[i];
    }
  }
  return cells;
}

// Rows of the table under "## All settings", keyed by the setting name in the first cell. Other
// sections mention settings in tables too, so only that section counts.
std::map<std::string, std::vector<std::string>> SettingRows(const std::string& docs) {
  std::map<std::string, std::vector<std::string>> rows;
  std::istringstream lines(docs);
  bool in_section = false;
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("## ", 0) == 0) in_section = line == "## All settings";
    if (!in_section || line.rfind("| `FORGE_", 0) != 0) continue;
    std::vector<std::string> cells = Cells(line);
    if (cells.empty()) continue;
    const std::string name = cells[0].substr(1, cells[0].size() - 2);  // strip the backquotes
    rows[name] = std::move(cells);
  }
  return rows;
}

TEST(Docs, SettingsMdMentionsEverySetting) {
  const std::string docs = ReadDocs();
  ASSERT_FALSE(docs.empty()) << "cannot read docs/settings.md";
  for (const SettingInfo& s : Settings()) {
    EXPECT_NE(docs.find(s.name), std::string::npos) << s.name << " is not in docs/settings.md";
  }
}

TEST(Docs, SettingsTableMatchesTheCodeRowForRow) {
  const auto rows = SettingRows(ReadDocs());
  ASSERT_FALSE(rows.empty()) << "docs/settings.md has no \"## All settings\" table";
  std::map<std::string, bool> known;
  for (const SettingInfo& s : Settings()) {
    known[s.name] = true;
    const auto row = rows.find(s.name);
    ASSERT_NE(row, rows.end()) << "docs/settings.md has no table row for " << s.name;
    ASSERT_GE(row->second.size(), 4u) << s.name;
    const std::string default_cell = s.default_value.empty() ? "—" : "`" + s.default_value + "`";
    EXPECT_EQ(row->second[1], default_cell) << s.name << ": default";
    EXPECT_EQ(row->second[2], s.type) << s.name << ": type";
    EXPECT_FALSE(row->second[3].empty()) << s.name << ": meaning";
  }
  for (const auto& [name, cells] : rows) {
    EXPECT_TRUE(known.contains(name))
        << "docs/settings.md documents " << name << ", which is not in Settings()";
  }
}

}  // namespace
}  // namespace starforge::config
