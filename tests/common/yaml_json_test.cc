#include "starforge/common/yaml_json.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <string>

namespace starforge {
namespace {

using nlohmann::json;
using testing::HasSubstr;

// The message of text that must not parse.
std::string SyntaxErrorOf(std::string_view text) {
  const StatusOr<json> doc = ParseYaml(text);
  if (doc.ok()) return "(no error)";
  EXPECT_EQ(doc.status().code(), Code::kInvalidArgument);
  return doc.status().message();
}

// The document of text that must parse (a failure fails the test, with its message).
json Doc(std::string_view text) {
  StatusOr<json> doc = ParseYaml(text);
  EXPECT_TRUE(doc.ok()) << doc.status().message();
  return doc.ok() ? std::move(doc).value() : json();
}

TEST(ParseYamlTest, CoreSchemaResolvesPlainScalars) {
  const json doc =
      Doc("int: 8\nneg: -3\nplus: +4\nhex: 0x1F\noct: 0o17\nfloat: 1.5\nexp: 1e3\ndot: .5\n"
          "inf: .inf\nninf: -.Inf\nt: true\nT: True\nf: FALSE\nn1: null\nn2: ~\nn3:\n"
          "yes: yes\nno: no\non: on\noff: off\ny: y\nzero_lead: 011\nstr: hello world\n"
          "version: 1.2.3\nunderscore: 1_000\nbinary: 0b11\nhexUpper: 0X1F\n");
  EXPECT_EQ(doc["int"], 8);
  EXPECT_TRUE(doc["int"].is_number_integer());
  EXPECT_EQ(doc["neg"], -3);
  EXPECT_EQ(doc["plus"], 4);
  EXPECT_EQ(doc["hex"], 31);
  EXPECT_EQ(doc["oct"], 15);
  EXPECT_EQ(doc["float"], 1.5);
  EXPECT_TRUE(doc["exp"].is_number_float());
  EXPECT_EQ(doc["exp"], 1000.0);
  EXPECT_EQ(doc["dot"], 0.5);
  EXPECT_TRUE(std::isinf(doc["inf"].get<double>()) && doc["inf"].get<double>() > 0);
  EXPECT_TRUE(std::isinf(doc["ninf"].get<double>()) && doc["ninf"].get<double>() < 0);
  EXPECT_EQ(doc["t"], true);
  EXPECT_EQ(doc["T"], true);
  EXPECT_EQ(doc["f"], false);
  EXPECT_TRUE(doc["n1"].is_null());
  EXPECT_TRUE(doc["n2"].is_null());
  EXPECT_TRUE(doc["n3"].is_null());
  // YAML 1.1 booleans are plain strings in YAML 1.2.
  EXPECT_EQ(doc["yes"], "yes");
  EXPECT_EQ(doc["no"], "no");
  EXPECT_EQ(doc["on"], "on");
  EXPECT_EQ(doc["off"], "off");
  EXPECT_EQ(doc["y"], "y");
  EXPECT_EQ(doc["zero_lead"], 11);
  EXPECT_EQ(doc["str"], "hello world");
  EXPECT_EQ(doc["version"], "1.2.3");
  EXPECT_EQ(doc["underscore"], "1_000");
  EXPECT_EQ(doc["binary"], "0b11");
  EXPECT_EQ(doc["hexUpper"], "0X1F");
}

TEST(ParseYamlTest, NanIsAFloat) {
  const json doc = Doc("x: .nan");
  EXPECT_TRUE(std::isnan(doc["x"].get<double>()));
}

TEST(ParseYamlTest, QuotedAndBlockScalarsStayStrings) {
  const json doc =
      Doc("a: \"8\"\nb: 'true'\nc: \"null\"\nd: ''\ne: |\n  8\nf: >\n  1e3\ng: !!str 42\nh: ! 7\n");
  EXPECT_EQ(doc["a"], "8");
  EXPECT_EQ(doc["b"], "true");
  EXPECT_EQ(doc["c"], "null");
  EXPECT_EQ(doc["d"], "");
  EXPECT_EQ(doc["e"], "8\n");
  EXPECT_EQ(doc["f"], "1e3\n");
  EXPECT_EQ(doc["g"], "42");
  EXPECT_EQ(doc["h"], "7");
}

TEST(ParseYamlTest, IntegersBeyondInt64) {
  const json doc =
      Doc("u: 18446744073709551615\nbig: 99999999999999999999\n"
          "low: -9223372036854775808\n");
  EXPECT_TRUE(doc["u"].is_number_unsigned());
  EXPECT_EQ(doc["u"].get<uint64_t>(), 18446744073709551615ull);
  EXPECT_TRUE(doc["big"].is_number_float());
  EXPECT_EQ(doc["low"].get<int64_t>(), std::numeric_limits<int64_t>::min());
}

TEST(ParseYamlTest, JsonIsYaml) {
  const json doc = Doc(R"({"name": "x", "pools": [{"machines": 2}], "ok": true, "n": null})");
  EXPECT_EQ(doc,
            json::parse(R"({"name": "x", "pools": [{"machines": 2}], "ok": true, "n": null})"));
}

TEST(ParseYamlTest, KeysAreTheirTextEvenWhenTheyLookLikeOtherTypes) {
  const json doc = Doc("8: a\ntrue: b\n\"\": c\n~: d\n");
  EXPECT_EQ(doc, json({{"8", "a"}, {"true", "b"}, {"", "c"}, {"null", "d"}}));
}

TEST(ParseYamlTest, AnchorsAndAliasesExpand) {
  const json doc = Doc("base: &b {cpu: 1, tags: [x]}\ncopy: *b\nk: &s hello\nv: *s\n");
  EXPECT_EQ(doc["copy"], doc["base"]);
  EXPECT_EQ(doc["v"], "hello");
}

TEST(ParseYamlTest, EmptyDocumentIsNull) {
  EXPECT_TRUE(Doc("").is_null());
  EXPECT_TRUE(Doc("# only a comment\n").is_null());
  EXPECT_TRUE(Doc("---\n").is_null());
}

TEST(ParseYamlTest, TopLevelScalarsAndLists) {
  EXPECT_EQ(Doc("42"), 42);
  EXPECT_EQ(Doc("- a\n- 2\n"), json::array({"a", 2}));
}

TEST(ParseYamlTest, DuplicateKeysAreErrors) {
  EXPECT_EQ(SyntaxErrorOf("a: 1\nb: 2\na: 3\n"), "line 3, column 1: duplicate key \"a\"");
  EXPECT_EQ(SyntaxErrorOf("p:\n  - x: 1\n    x: 2\n"), "line 3, column 5: duplicate key \"x\"");
  EXPECT_EQ(SyntaxErrorOf(R"({"a": 1, "a": 2})"), "line 1, column 10: duplicate key \"a\"");
}

TEST(ParseYamlTest, SyntaxErrorsCarryLineAndColumn) {
  EXPECT_THAT(SyntaxErrorOf("a: [1, 2\nb: 3\n"),
              testing::MatchesRegex("line [0-9]+, column [0-9]+: .+"));
  EXPECT_EQ(SyntaxErrorOf("a: \"open"), "line 1, column 9: illegal EOF in scalar");
  EXPECT_THAT(SyntaxErrorOf("a: b: c\n"), testing::StartsWith("line 1, column "));
  EXPECT_THAT(SyntaxErrorOf("a: *nowhere\n"), testing::StartsWith("line 1, column 4: "));
}

TEST(ParseYamlTest, StructuralErrors) {
  EXPECT_EQ(SyntaxErrorOf("? [a]\n: 1\n"), "line 1, column 3: mapping keys must be scalars");
  EXPECT_EQ(SyntaxErrorOf("a: 1\n---\nb: 2\n"),
            "expected a single YAML document, found more than one ('---')");
  EXPECT_EQ(SyntaxErrorOf("a: !!int 5\n"),
            "line 1, column 4: unsupported tag !!int (only !!str is supported; remove the tag)");
  EXPECT_EQ(SyntaxErrorOf("a: !custom {}\n"),
            "line 1, column 4: unsupported tag !custom (remove the tag)");
  EXPECT_EQ(SyntaxErrorOf("&a [*a]\n"),
            "line 1, column 5: an alias cannot refer to a node that contains it");
  EXPECT_EQ(SyntaxErrorOf("ok: 1\nbad: \"\xff\"\n"), "line 2, column 7: invalid UTF-8");
  EXPECT_EQ(SyntaxErrorOf("x: \xC0\xAF\n"), "line 1, column 4: invalid UTF-8");      // overlong
  EXPECT_EQ(SyntaxErrorOf("x: \xED\xA0\x80\n"), "line 1, column 4: invalid UTF-8");  // surrogate
}

TEST(ParseYamlTest, AliasExpansionIsBounded) {
  std::string bomb = "a: &a [x, x, x, x, x, x, x, x, x, x]\n";
  for (char c = 'b'; c <= 'h'; ++c) {
    const char prev = static_cast<char>(c - 1);
    bomb += std::string(1, c) + ": &" + c + " [*" + prev + ", *" + prev + ", *" + prev + ", *" +
            prev + ", *" + prev + ", *" + prev + ", *" + prev + ", *" + prev + ", *" + prev +
            ", *" + prev + "]\n";
  }
  EXPECT_THAT(SyntaxErrorOf(bomb), HasSubstr("document too large"));
}

TEST(EmitYamlTest, BlockStyleSortedKeysAndCompactEmpties) {
  const json v = {{"name", "grpo"},
                  {"env", json::object()},
                  {"args", json::array()},
                  {"pools", {{{"name", "train"}, {"machines", 2}}}},
                  {"ok", true},
                  {"none", nullptr},
                  {"ratio", 0.5}};
  EXPECT_EQ(EmitYaml(v),
            "args: []\n"
            "env: {}\n"
            "name: grpo\n"
            "none: ~\n"
            "ok: true\n"
            "pools:\n"
            "  - machines: 2\n"
            "    name: train\n"
            "ratio: 0.5\n");
}

TEST(EmitYamlTest, QuotesStringsThatWouldReadAsOtherTypes) {
  const json v = {{"a", "8"},   {"b", "true"}, {"c", "null"}, {"d", ""},      {"e", "1e3"},
                  {"f", "yes"}, {"g", "~"},    {"h", "0x1F"}, {"i", "plain"}, {"j", "256Gi"}};
  EXPECT_EQ(EmitYaml(v),
            "a: \"8\"\nb: \"true\"\nc: \"null\"\nd: \"\"\ne: \"1e3\"\nf: \"yes\"\ng: \"~\"\n"
            "h: \"0x1F\"\ni: plain\nj: 256Gi\n");
}

TEST(EmitYamlTest, MultiLineStringsUseLiteralBlocks) {
  EXPECT_EQ(EmitYaml({{"script", "set -e\n\necho hi\n"}}), "script: |\n  set -e\n\n  echo hi\n");
  EXPECT_EQ(EmitYaml(json::array({"a\nb\n", "c"})), "- |\n  a\n  b\n- c\n");
  // Without a final newline, literal style ("|") would add one: double quotes instead.
  EXPECT_EQ(EmitYaml({{"s", "a\nb"}}), "s: \"a\\nb\"\n");
}

TEST(EmitYamlTest, FloatsKeepTheirType) {
  EXPECT_EQ(EmitYaml(json(1.0)), "1.0\n");
  EXPECT_EQ(EmitYaml(json(1e20)), "1e+20\n");
  EXPECT_EQ(Doc(EmitYaml(json(1.0))).type(), json::value_t::number_float);
  EXPECT_EQ(EmitYaml(json(std::numeric_limits<double>::infinity())), ".inf\n");
  EXPECT_EQ(EmitYaml(json(-std::numeric_limits<double>::infinity())), "-.inf\n");
  EXPECT_EQ(EmitYaml(json(std::numeric_limits<double>::quiet_NaN())), ".nan\n");
}

TEST(EmitYamlTest, ScalarsAtTopLevel) {
  EXPECT_EQ(EmitYaml(json("x")), "x\n");
  EXPECT_EQ(EmitYaml(json(nullptr)), "~\n");
  EXPECT_EQ(EmitYaml(json(7)), "7\n");
  EXPECT_EQ(EmitYaml(json::object()), "{}\n");
  EXPECT_EQ(EmitYaml(json::array()), "[]\n");
}

TEST(EmitYamlTest, IsDeterministic) {
  const json v = json::parse(R"({"b": [1, {"z": 1, "a": "x\ny\n"}], "a": {"k": "v"}})");
  EXPECT_EQ(EmitYaml(v), EmitYaml(json::parse(v.dump())));
}

const char* const kTrickyStrings[] = {
    "8",
    "0x1F",
    "0o17",
    "1e3",
    "1E3",
    "-1",
    "+1",
    ".5",
    "5.",
    "1_000",
    "0b101",
    "12:30",
    "1.2.3",
    ".inf",
    "-.inf",
    ".nan",
    ".NaN",
    "true",
    "True",
    "TRUE",
    "false",
    "yes",
    "Yes",
    "no",
    "No",
    "on",
    "On",
    "off",
    "OFF",
    "y",
    "Y",
    "n",
    "N",
    "~",
    "null",
    "Null",
    "NULL",
    "",
    " ",
    "  ",
    " leading space",
    "trailing space ",
    "a: b",
    "a:b",
    "a :b",
    "- x",
    "-x",
    "-",
    "--",
    "---",
    "...",
    "#c",
    "a #c",
    "a# c",
    "multi\nline\n",
    "multi\nline",
    "trailing newline missing\nx",
    "two newlines\n\n",
    "\n",
    "\n\n",
    "\nleading newline\n",
    "  indented\nsecond\n",
    "line with trailing space \nx\n",
    "tab\there",
    "\ttab first",
    "tab last\t",
    "\ttab\nblock\n",
    "quote'\"",
    "'single'",
    "\"double\"",
    "back\\slash",
    "unicode é ü 日本語 🚀",
    "unicode\nblock ✓\n",
    "@x",
    "`x",
    "*x",
    "&x",
    "!x",
    "%x",
    "{x}",
    "[x]",
    "|",
    ">",
    "|-",
    ">+",
    "?",
    "? x",
    ":",
    ": x",
    ",",
    "x,y",
    "{",
    "}",
    "[",
    "]",
    "=",
    "<<",
    "\r",
    "crlf\r\n",
    "a\rb\n",
    "ctl\x01",
    "del\x7f",
    "nel\xC2\x85x",
    "ls\xE2\x80\xA8x",
    "\xEF\xBB\xBF"
    "bom",
    "%YAML 1.2",
    "key: value\nother: thing\n",
    "- item\n- item2\n",
    "  \n",
    "x\n  \n",
    "x\n \ny\n",
    "a\n\n\nb\n",
    "# comment\nnot comment\n",
    "ends with colon:",
    "http://x/y?z=1#f",
    "${VAR}",
    "$(cmd)",
    "a; b | c",
    "C:\\path\\to",
    "0",
    "-0",
    "00",
    "0.0",
    "1e",
    "e3",
    "0x",
    "0o8",
    "0xG",
};

TEST(YamlRoundTripTest, TrickyStringsAsValuesKeysAndListItems) {
  for (const char* s : kTrickyStrings) {
    const std::string str = s;
    const json as_value = {{"v", str}};
    const json as_key = {{str, 1}};
    const json as_item = json::array({str, str});
    const json top = str;
    for (const json& v : {as_value, as_key, as_item, top}) {
      const std::string yaml = EmitYaml(v);
      const StatusOr<json> parsed = ParseYaml(yaml);
      ASSERT_TRUE(parsed.ok()) << "string " << json(str).dump() << " as\n" << yaml;
      const json& back = *parsed;
      EXPECT_EQ(back, v) << "string " << json(str).dump() << " emitted as\n" << yaml;
      EXPECT_EQ(yaml.back(), '\n');
    }
  }
}

TEST(YamlRoundTripTest, AllStringsAreStableEvenInsideNesting) {
  json nested = json::object();
  for (size_t i = 0; i < std::size(kTrickyStrings); ++i) {
    nested["k" + std::to_string(i)] = {
        {"list", {kTrickyStrings[i], {{"deep", kTrickyStrings[i]}}}}};
  }
  const std::string yaml = EmitYaml(nested);
  EXPECT_EQ(Doc(yaml), nested);
  EXPECT_EQ(EmitYaml(Doc(yaml)), yaml);
}

TEST(YamlRoundTripTest, NumbersBoolsNullsAndNesting) {
  const json v = json::parse(R"({
    "ints": [0, -1, 1, 9223372036854775807, -9223372036854775808, 18446744073709551615],
    "floats": [0.5, -0.0, 1.0, 1e-7, 1.7976931348623157e308, 5e-324, 123456.789],
    "bools": [true, false], "null": null,
    "nested": [[], {}, [[1, [2]]], [{"a": {"b": [{}]}}]],
    "mixed": {"": "", " ": " ", "0": 0}
  })");
  const std::string yaml = EmitYaml(v);
  EXPECT_EQ(Doc(yaml), v) << yaml;
}

TEST(YamlRoundTripTest, HugeScalarsDoNotExhaustTheStack) {
  const std::string digits(1'000'000, '7');
  EXPECT_TRUE(Doc("x: " + digits)["x"].is_number_float());
  const json v = {{"digits", digits}, {"word", std::string(1'000'000, 'w')}};
  EXPECT_EQ(Doc(EmitYaml(v)), v);
}

TEST(YamlRoundTripTest, VeryLongStringsAndKeys) {
  const std::string long_str(5000, 'x');
  const json v = {{long_str, long_str + "\n" + long_str + "\n"}, {"k", long_str + " y"}};
  EXPECT_EQ(Doc(EmitYaml(v)), v);
}

}  // namespace
}  // namespace starforge
