#include "io/json.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <string>

#include "core/error.h"

namespace qlm::io {
namespace {

using Json = nlohmann::json;

// Runs `fn`, expects a qlm::Error with `code` whose full message contains `substring`.
void expect_error(const std::function<void()>& fn, const std::string& code, const std::string& substring) {
  try {
    fn();
    ADD_FAILURE() << "expected qlm::Error " << code << ", nothing thrown";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), code) << e.what();
    EXPECT_NE(std::string(e.what()).find(substring), std::string::npos)
        << "message '" << e.what() << "' lacks '" << substring << "'";
  }
}

JsonView view_of(const std::string& text, const std::string& path = "quantization_config") {
  return JsonView(std::make_shared<const Json>(parse_json_strict(text, "config.json")), "config.json", path);
}

// ---- parse_json_strict ----

TEST(JsonParse, ParsesOrdinaryDocument) {
  Json doc = parse_json_strict(R"({"a": 1, "b": [1, 2, {"c": "x"}], "d": null})", "t.json");
  EXPECT_EQ(doc["a"], 1);
  EXPECT_EQ(doc["b"][2]["c"], "x");
  EXPECT_TRUE(doc["d"].is_null());
}

TEST(JsonParse, SameKeyInSiblingObjectsIsFine) {
  EXPECT_NO_THROW(parse_json_strict(R"({"a": {"x": 1}, "b": {"x": 2}, "c": [{"x": 1}, {"x": 2}]})", "t"));
}

TEST(JsonParse, DuplicateKeyAtRoot) {
  expect_error([] { parse_json_strict(R"({"bits": 4, "bits": 8})", "config.json"); }, "json.duplicate_key",
               "duplicate key \"bits\" in object (root)");
}

TEST(JsonParse, DuplicateKeyNestedInObject) {
  expect_error(
      [] { parse_json_strict(R"({"quantization_config": {"bits": 4, "group_size": 1, "bits": 4}})", "c.json"); },
      "json.duplicate_key", "duplicate key \"bits\" in object quantization_config");
}

TEST(JsonParse, DuplicateKeyInsideArrayElement) {
  const std::string text =
      R"({"config_groups": {"group_0": {"targets": ["Linear"], "weights": [{"a": 1}, {"b": 1, "b": 2}]}}})";
  expect_error([&] { parse_json_strict(text, "c.json"); }, "json.duplicate_key",
               "in object config_groups.group_0.weights[1]");
}

TEST(JsonParse, DuplicateKeyAfterNestedSiblings) {
  // Keys of a closed child object must not leak into the parent's key set, and vice versa.
  EXPECT_NO_THROW(parse_json_strict(R"({"a": {"b": 1}, "b": {"a": 2}})", "t"));
  expect_error([] { parse_json_strict(R"({"a": {"b": 1}, "c": 2, "a": 3})", "t"); }, "json.duplicate_key",
               "\"a\"");
}

TEST(JsonParse, ErrorNamesSourceFile) {
  try {
    parse_json_strict(R"({"x": 1, "x": 2})", "/models/m/config.json");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.context().file, "/models/m/config.json");
  }
}

TEST(JsonParse, DepthLimitIsInclusive) {
  std::string ok = std::string(kMaxJsonDepth, '[') + std::string(kMaxJsonDepth, ']');
  EXPECT_NO_THROW(parse_json_strict(ok, "t"));
  std::string deep = std::string(kMaxJsonDepth + 1, '[') + std::string(kMaxJsonDepth + 1, ']');
  expect_error([&] { parse_json_strict(deep, "t"); }, "json.too_deep", "nesting deeper than 64");
}

TEST(JsonParse, DepthBombOfArraysDoesNotOverflowTheStack) {
  const size_t n = 100'000;
  std::string bomb = std::string(n, '[') + std::string(n, ']');
  expect_error([&] { parse_json_strict(bomb, "bomb.json"); }, "json.too_deep", "[0][0][0]");
  std::string unterminated(n, '[');
  expect_error([&] { parse_json_strict(unterminated, "bomb.json"); }, "json.too_deep", "64");
}

TEST(JsonParse, DepthBombOfObjects) {
  std::string bomb;
  for (int i = 0; i < 100'000; ++i) bomb += R"({"a":)";
  bomb += "1";
  bomb += std::string(100'000, '}');
  expect_error([&] { parse_json_strict(bomb, "t"); }, "json.too_deep", "a.a.a");
}

TEST(JsonParse, SyntaxErrorReportsBytePosition) {
  expect_error([] { parse_json_strict(R"({"a": 1,})", "t"); }, "json.parse", "at byte 9");
  expect_error([] { parse_json_strict("", "t"); }, "json.parse", "byte");
  expect_error([] { parse_json_strict(R"({"a": 1} trailing)", "t"); }, "json.parse", "byte");
  expect_error([] { parse_json_strict(R"({"a": 1 // comment
})", "t"); }, "json.parse", "byte");
  expect_error([] { parse_json_strict(R"({"a": NaN})", "t"); }, "json.parse", "byte");
}

TEST(JsonParse, InvalidUtf8IsRejected) {
  expect_error([] { parse_json_strict("{\"a\": \"\xff\xfe\"}", "t"); }, "json.parse", "byte");
  expect_error([] { parse_json_strict("{\"\xc3\x28\": 1}", "t"); }, "json.parse", "byte");
  // Overlong encoding of '/'.
  expect_error([] { parse_json_strict("{\"a\": \"\xc0\xaf\"}", "t"); }, "json.parse", "byte");
  // A lone surrogate escape is not valid either.
  expect_error([] { parse_json_strict(R"({"a": "\ud800"})", "t"); }, "json.parse", "byte");
  EXPECT_NO_THROW(parse_json_strict("{\"a\": \"\xc3\xa9\xe2\x82\xac\"}", "t"));
}

TEST(JsonParse, EmbeddedNulByteIsRejected) {
  std::string text = "{\"a\": \"x";
  text.push_back('\0');
  text += "\"}";
  expect_error([&] { parse_json_strict(text, "t"); }, "json.parse", "byte");
}

TEST(JsonParse, NulByteAfterAValidDocumentIsRejected) {
  std::string text = "{}";
  text.push_back('\0');
  text += "garbage";
  expect_error([&] { parse_json_strict(text, "t"); }, "json.parse", "NUL byte");
}

TEST(JsonParse, HugeNumbers) {
  expect_error([] { parse_json_strict(R"({"x": 1e400})", "t"); }, "json.number_range", "1e400");
  expect_error([] { parse_json_strict(R"({"x": [-1e99999]})", "t"); }, "json.number_range", "-1e99999");
  // Integers past uint64 become floats in nlohmann; get_int then refuses them (see below).
  Json doc = parse_json_strict(R"({"x": 18446744073709551616})", "t");
  EXPECT_TRUE(doc["x"].is_number_float());
  Json max = parse_json_strict(R"({"x": 18446744073709551615, "y": -9223372036854775808})", "t");
  EXPECT_TRUE(max["x"].is_number_unsigned());
  EXPECT_EQ(max["y"].get<int64_t>(), INT64_MIN);
}

TEST(JsonParse, NeverCrashesOnTruncations) {
  const std::string text =
      R"({"quantization_config": {"bits": 4, "list": [1, 2.5, "s", true, null, {"k": [[]]}]}, "e": "\u00e9"})";
  for (size_t n = 0; n < text.size(); ++n) {
    try {
      parse_json_strict(text.substr(0, n), "t");
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), "json.parse");
    }
  }
}

TEST(JsonParse, ReadJsonFile) {
  const auto dir = std::filesystem::temp_directory_path() / "qlm_json_test_read";
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "ok.json") << R"({"a": 1})";
  EXPECT_EQ(read_json_file(dir / "ok.json")["a"], 1);
  expect_error([&] { read_json_file(dir / "absent.json"); }, "json.read", "absent.json");
  std::ofstream(dir / "dup.json") << R"({"a": 1, "a": 1})";
  expect_error([&] { read_json_file(dir / "dup.json"); }, "json.duplicate_key", "dup.json");
  std::filesystem::remove_all(dir);
}

// ---- json_type_name ----

TEST(JsonView, TypeNames) {
  EXPECT_EQ(json_type_name(Json(4)), "integer");
  EXPECT_EQ(json_type_name(Json(4u)), "integer");
  EXPECT_EQ(json_type_name(Json(4.0)), "float");
  EXPECT_EQ(json_type_name(Json("4")), "string");
  EXPECT_EQ(json_type_name(Json(true)), "boolean");
  EXPECT_EQ(json_type_name(Json::array()), "array");
  EXPECT_EQ(json_type_name(Json::object()), "object");
  EXPECT_EQ(json_type_name(Json(nullptr)), "null");
}

// ---- JsonView ----

TEST(JsonView, RootMustBeObject) {
  expect_error([] { JsonView(std::make_shared<const Json>(Json::array()), "f.json"); }, "json.type",
               "expected object, found array");
  expect_error([] { JsonView(nullptr, "f.json"); }, "json.type", "no document");
}

TEST(JsonView, HasIsNullKeysAndPaths) {
  JsonView v = view_of(R"({"b": 1, "a": null})");
  EXPECT_TRUE(v.has("a"));
  EXPECT_TRUE(v.is_null("a"));
  EXPECT_FALSE(v.is_null("b"));
  EXPECT_FALSE(v.is_null("zzz"));
  EXPECT_FALSE(v.has("zzz"));
  EXPECT_EQ(v.keys(), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(v.source(), "config.json");
  EXPECT_EQ(v.path(), "quantization_config");
  EXPECT_EQ(v.key_path("bits"), "quantization_config.bits");
  EXPECT_EQ(view_of("{}", "").key_path("bits"), "bits");
  EXPECT_EQ(v.at("b"), 1);
  expect_error([&] { v.at("c"); }, "config.missing_key", "quantization_config.c");
}

TEST(JsonView, DefaultViewIsEmpty) {
  JsonView v;
  EXPECT_FALSE(v.has("a"));
  EXPECT_TRUE(v.keys().empty());
  EXPECT_EQ(v.opt_int("a"), std::nullopt);
  expect_error([&] { v.get_int("a"); }, "config.missing_key", "a");
}

TEST(JsonView, GetIntAcceptsOnlyIntegers) {
  JsonView v = view_of(
      R"({"i": 4, "neg": -3, "u": 9223372036854775807, "big": 9223372036854775808, "huge": 18446744073709551616,
          "f": 4.0, "s": "4", "b": true, "n": null, "a": [4], "o": {}})");
  EXPECT_EQ(v.get_int("i"), 4);
  EXPECT_EQ(v.get_int("neg"), -3);
  EXPECT_EQ(v.get_int("u"), INT64_MAX);
  expect_error([&] { v.get_int("big"); }, "config.value", "does not fit");
  expect_error([&] { v.get_int("huge"); }, "config.type", "expected integer, found float");
  expect_error([&] { v.get_int("f"); }, "config.type", "quantization_config.f: expected integer, found float 4.0");
  expect_error([&] { v.get_int("s"); }, "config.type", R"(quantization_config.s: expected integer, found string "4")");
  expect_error([&] { v.get_int("b"); }, "config.type", "found boolean true");
  expect_error([&] { v.get_int("n"); }, "config.type", "found null");
  expect_error([&] { v.get_int("a"); }, "config.type", "found array [4]");
  expect_error([&] { v.get_int("o"); }, "config.type", "found object {}");
  expect_error([&] { v.get_int("missing"); }, "config.missing_key", "quantization_config.missing");
}

TEST(JsonView, TypeErrorCarriesFileInContext) {
  JsonView v = view_of(R"({"bits": "4"})");
  try {
    v.get_int("bits");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.context().file, "config.json");
    EXPECT_EQ(e.message(), R"(quantization_config.bits: expected integer, found string "4")");
  }
}

TEST(JsonView, GetNumber) {
  JsonView v = view_of(R"({"i": 4, "u": 18446744073709551615, "f": 1e-5, "s": "1e-5", "b": false})");
  EXPECT_EQ(v.get_number("i"), 4.0);
  EXPECT_EQ(v.get_number("u"), 18446744073709551615.0);
  EXPECT_EQ(v.get_number("f"), 1e-5);
  expect_error([&] { v.get_number("s"); }, "config.type", "expected number, found string \"1e-5\"");
  expect_error([&] { v.get_number("b"); }, "config.type", "found boolean false");
}

TEST(JsonView, GetBool) {
  JsonView v = view_of(R"({"t": true, "f": false, "one": 1, "s": "true"})");
  EXPECT_TRUE(v.get_bool("t"));
  EXPECT_FALSE(v.get_bool("f"));
  expect_error([&] { v.get_bool("one"); }, "config.type", "expected boolean, found integer 1");
  expect_error([&] { v.get_bool("s"); }, "config.type", "found string \"true\"");
}

TEST(JsonView, GetString) {
  JsonView v = view_of(R"({"s": "gptq", "e": "", "i": 4})");
  EXPECT_EQ(v.get_string("s"), "gptq");
  EXPECT_EQ(v.get_string("e"), "");
  expect_error([&] { v.get_string("i"); }, "config.type", "expected string, found integer 4");
}

TEST(JsonView, GetStringList) {
  JsonView v = view_of(R"({"l": ["lm_head", "model.layers.0"], "e": [], "bad": ["a", 1], "s": "lm_head"})");
  EXPECT_EQ(v.get_string_list("l"), (std::vector<std::string>{"lm_head", "model.layers.0"}));
  EXPECT_TRUE(v.get_string_list("e").empty());
  expect_error([&] { v.get_string_list("bad"); }, "config.type",
               "quantization_config.bad[1]: expected string, found integer 1");
  expect_error([&] { v.get_string_list("s"); }, "config.type", "expected list of strings, found string");
}

TEST(JsonView, GetIntList) {
  JsonView v = view_of(R"({"l": [128, 128], "f": [128, 128.0], "s": ["128"], "o": {"a": 1}})");
  EXPECT_EQ(v.get_int_list("l"), (std::vector<int64_t>{128, 128}));
  expect_error([&] { v.get_int_list("f"); }, "config.type", "quantization_config.f[1]: expected integer, found float");
  expect_error([&] { v.get_int_list("s"); }, "config.type", "config.s[0]");
  expect_error([&] { v.get_int_list("o"); }, "config.type", "expected list of integers, found object");
}

TEST(JsonView, GetObjectNestsPathsAndKeepsDocumentAlive) {
  JsonView inner;
  {
    JsonView root = view_of(R"({"config_groups": {"group_0": {"weights": {"num_bits": "4"}}}})", "quantization_config");
    inner = root.get_object("config_groups").get_object("group_0").get_object("weights");
  }
  EXPECT_EQ(inner.path(), "quantization_config.config_groups.group_0.weights");
  expect_error([&] { inner.get_int("num_bits"); }, "config.type",
               R"(quantization_config.config_groups.group_0.weights.num_bits: expected integer, found string "4")");
  JsonView root = view_of(R"({"a": [1]})");
  expect_error([&] { root.get_object("a"); }, "config.type", "expected object, found array");
}

TEST(JsonView, OptionalAccessors) {
  JsonView v = view_of(
      R"({"i": 4, "f": 0.5, "b": true, "s": "x", "sl": ["a"], "il": [1], "o": {"k": 1}, "n": null, "wrong": "4"})");
  EXPECT_EQ(v.opt_int("i"), 4);
  EXPECT_EQ(v.opt_number("f"), 0.5);
  EXPECT_EQ(v.opt_bool("b"), true);
  EXPECT_EQ(v.opt_string("s"), "x");
  EXPECT_EQ(v.opt_string_list("sl"), std::vector<std::string>{"a"});
  EXPECT_EQ(v.opt_int_list("il"), std::vector<int64_t>{1});
  ASSERT_TRUE(v.opt_object("o").has_value());
  EXPECT_EQ(v.opt_object("o")->get_int("k"), 1);
  for (const char* key : {"n", "absent"}) {
    EXPECT_FALSE(v.opt_int(key));
    EXPECT_FALSE(v.opt_number(key));
    EXPECT_FALSE(v.opt_bool(key));
    EXPECT_FALSE(v.opt_string(key));
    EXPECT_FALSE(v.opt_string_list(key));
    EXPECT_FALSE(v.opt_int_list(key));
    EXPECT_FALSE(v.opt_object(key));
  }
  expect_error([&] { v.opt_int("wrong"); }, "config.type", "expected integer, found string \"4\"");
  expect_error([&] { v.opt_number("wrong"); }, "config.type", "expected number");
  expect_error([&] { v.opt_bool("wrong"); }, "config.type", "expected boolean");
  expect_error([&] { v.opt_string("i"); }, "config.type", "expected string");
  expect_error([&] { v.opt_string_list("wrong"); }, "config.type", "list of strings");
  expect_error([&] { v.opt_int_list("wrong"); }, "config.type", "list of integers");
  expect_error([&] { v.opt_object("wrong"); }, "config.type", "expected object");
}

TEST(JsonView, FailValue) {
  JsonView v = view_of(R"({"bits": 5})");
  expect_error([&] { v.fail_value("bits", "one of 2, 3, 4, 8"); }, "config.value",
               "quantization_config.bits: unsupported value 5; expected one of 2, 3, 4, 8");
  try {
    v.fail_value("bits", "4", "requantize");
  } catch (const Error& e) {
    EXPECT_EQ(e.remedy(), "requantize");
    EXPECT_EQ(e.context().file, "config.json");
  }
  expect_error([&] { v.fail_value("sym", "true"); }, "config.value", "(absent)");
}

TEST(JsonView, RejectUnknownKeys) {
  JsonView v = view_of(R"({"num_bits": 4, "type": "int", "symetric": true})", "weights");
  EXPECT_NO_THROW(v.reject_unknown_keys({"num_bits", "type", "symetric"}));
  expect_error([&] { v.reject_unknown_keys({"num_bits", "type", "symmetric"}); }, "config.unknown_key",
               "weights.symetric: unknown key; allowed keys here: num_bits, type, symmetric");
}

TEST(JsonView, FromFile) {
  const auto dir = std::filesystem::temp_directory_path() / "qlm_json_test_view";
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "config.json") << R"({"hidden_size": 64})";
  JsonView v = JsonView::from_file(dir / "config.json");
  EXPECT_EQ(v.get_int("hidden_size"), 64);
  EXPECT_EQ(v.source(), (dir / "config.json").string());
  std::ofstream(dir / "list.json") << "[1]";
  expect_error([&] { JsonView::from_file(dir / "list.json"); }, "json.type", "expected object");
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace qlm::io
