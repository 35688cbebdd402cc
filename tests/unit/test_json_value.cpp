#include <catch2/catch.hpp>

#include "cli/json_value.h"

using namespace appendguard;

TEST_CASE("the JSON reader takes what the library writes") {
  auto value = parse_json(
      R"( {"a":"x\"\\\n\t\u0001\u00ff\u20ac","n":-12.5e3,"b":true,"z":null,"list":["p",{"q":[]}],"o":{}} )");
  REQUIRE(value);
  CHECK(value->kind == JsonValue::Kind::kObject);
  CHECK(value->text_of("a") == "x\"\\\n\t\x01\xff\xe2\x82\xac");
  CHECK(value->find("a")->raw == R"("x\"\\\n\t\u0001\u00ff\u20ac")");
  CHECK(value->text_of("n") == "-12.5e3");
  CHECK(value->find("b")->kind == JsonValue::Kind::kBool);
  CHECK(value->find("z")->kind == JsonValue::Kind::kNull);
  REQUIRE(value->find("list")->items.size() == 2);
  CHECK(value->find("list")->items[1].find("q")->kind == JsonValue::Kind::kArray);
  CHECK(value->text_of("missing").empty());
  CHECK(value->text_of("list").empty());
}

TEST_CASE("the JSON reader refuses what is not one JSON value") {
  for (const char* bad : {"", "{", "{\"a\":}", "{\"a\" 1}", "[1,]", "\"open", "{\"a\":1} x", "{a:1}",
                          "\"\\u12\"", "[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]"}) {
    CHECK_FALSE(parse_json(bad));
  }
}
