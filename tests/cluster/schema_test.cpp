// The store's records: written and read back, and every kind of bad content named, never thrown.

#include "gpucap/cluster/schema.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <limits>

#include "support/expect_error.hpp"

namespace gpucap::cluster {
namespace {

NodeRecord record() {
  NodeRecord r;
  r.incarnation = 17;
  r.safe_cap_w = 150.0;
  r.cap_in_force_w = 212.5;
  r.gpu = "a100 \"sxm\"";  // escaped
  r.model = "resnet50";
  r.curve.min_cap_w = 100.0;
  r.curve.max_cap_w = 400.0;
  r.curve.priority = 2.0;
  r.curve.tdp_w = 400.0;
  r.curve.points = {{100.0, 1.0 / 3.0, 1.0}, {250.0, 7.25, 0.9}, {400.0, 9.0, 0.5}};
  return r;
}

TEST(Schema, ANodeRecordReadsBackExactlyAndIsTheSameJsonAsATreeWouldWrite) {
  const auto r = record();
  const auto text = to_json(r);
  const auto parsed = parse_node_record(text);
  ASSERT_TRUE(std::holds_alternative<NodeRecord>(parsed)) << std::get<std::string>(parsed);
  const auto& back = std::get<NodeRecord>(parsed);
  EXPECT_EQ(back.incarnation, 17);
  EXPECT_EQ(back.gpu, r.gpu);
  EXPECT_EQ(back.safe_cap_w, 150.0);
  EXPECT_EQ(back.cap_in_force_w, 212.5);
  ASSERT_EQ(back.curve.points.size(), 3U);
  EXPECT_EQ(back.curve.points[0].throughput, 1.0 / 3.0);  // the shortest text that reads back exactly
  EXPECT_EQ(back.curve.points[2].slo_attainment, 0.5);
  EXPECT_EQ(back.curve.priority, 2.0);
  const nlohmann::json tree = {{"incarnation", 17},
                               {"safe_cap_w", 150.0},
                               {"cap_in_force_w", 212.5},
                               {"gpu", r.gpu},
                               {"model", "resnet50"},
                               {"curve",
                                {{"min_cap_w", 100.0},
                                 {"max_cap_w", 400.0},
                                 {"priority", 2.0},
                                 {"tdp_w", 400.0},
                                 {"points", {{100.0, 1.0 / 3.0, 1.0}, {250.0, 7.25, 0.9}, {400.0, 9.0, 0.5}}}}}};
  EXPECT_EQ(nlohmann::json::parse(text), tree);
}

TEST(Schema, ANaNInACurveTravelsAsNullAndTheCurveCheckNamesIt) {
  auto r = record();
  r.curve.points[1].throughput = std::numeric_limits<double>::quiet_NaN();
  const auto text = to_json(r);
  EXPECT_NE(text.find("null"), std::string::npos);
  const auto parsed = parse_node_record(text);
  ASSERT_TRUE(std::holds_alternative<NodeRecord>(parsed));
  const auto problem = curve_problem(std::get<NodeRecord>(parsed).curve);
  ASSERT_TRUE(problem.has_value());
  EXPECT_NE(problem->find("is not finite"), std::string::npos) << *problem;
}

TEST(Schema, BadRecordsAreNamedNotThrown) {
  EXPECT_EQ(std::get<std::string>(parse_node_record("{not json")), "not a JSON object");
  EXPECT_EQ(std::get<std::string>(parse_node_record("[1]")), "not a JSON object");
  EXPECT_EQ(std::get<std::string>(parse_node_record(R"({"incarnation": 1.5})")), "'incarnation' must be an integer");
  auto j = nlohmann::json::parse(to_json(record()));
  j["curve"].erase("tdp_w");
  EXPECT_EQ(std::get<std::string>(parse_node_record(j.dump())), "curve: 'tdp_w' is missing");
  j = nlohmann::json::parse(to_json(record()));
  j["curve"]["points"] = {{1, 2}};
  EXPECT_EQ(std::get<std::string>(parse_node_record(j.dump())), "curve: each point must be [cap_w, throughput, slo_attainment]");
  j = nlohmann::json::parse(to_json(record()));
  j["safe_cap_w"] = -1;
  EXPECT_EQ(std::get<std::string>(parse_node_record(j.dump())), "caps must not be negative");
  EXPECT_EQ(std::get<std::string>(parse_alloc_record(R"({"cap_w": 300, "safe_cap_w": 100, "bound_w": 200, "incarnation": 1})")),
            "'bound_w' must be at least 'cap_w'");
  EXPECT_EQ(std::get<std::string>(parse_ack_record(R"({"incarnation": 1, "revision": 2, "cap_w": 3, "leaving": 1})")),
            "'leaving' must be true or false");
  EXPECT_EQ(std::get<std::string>(parse_budget(budget_json(-5.0))), "budget -5 W is negative");
  EXPECT_EQ(std::get<std::string>(parse_budget(budget_json(2e9))), "budget 2e+09 W is absurd (more than 1e+09 W)");
  EXPECT_EQ(std::get<std::string>(parse_budget(R"({"budget_w": null})")), "'budget_w' must be a number");
  EXPECT_EQ(std::get<double>(parse_budget(budget_json(1200.0))), 1200.0);
}

TEST(Schema, TheStreamingReaderSkipsWhatItDoesNotKnowAndRefusesOddShapes) {
  const auto base = nlohmann::json::parse(to_json(record()));
  const auto problem = [](const nlohmann::json& j) {
    const auto parsed = parse_node_record(j.dump());
    return std::holds_alternative<std::string>(parsed) ? std::get<std::string>(parsed) : std::string("ok");
  };
  auto j = base;
  j["extra"] = {{"a", {1, {{"b", {2, 3}}}}}};
  j["curve"]["note"] = {{"points", {{1, 2, 3}}}};
  EXPECT_EQ(problem(j), "ok");
  j = base;
  j["curve"]["points"] = {nlohmann::json::object()};
  EXPECT_EQ(problem(j), "curve: each point must be [cap_w, throughput, slo_attainment]");
  j = base;
  j["curve"]["points"] = {{1, 2, 3, nlohmann::json::object()}};
  EXPECT_EQ(problem(j), "curve: each point must be [cap_w, throughput, slo_attainment]");
  j = base;
  j["curve"]["points"] = {{1, {2}, 3}};
  EXPECT_EQ(problem(j), "curve: each point must be [cap_w, throughput, slo_attainment]");
  j = base;
  j["curve"]["points"] = 5;
  EXPECT_EQ(problem(j), "curve: 'points' must be an array");
  j = base;
  j["curve"] = {1, 2};
  EXPECT_EQ(problem(j), "'curve' must be an object");
  j = base;
  j["safe_cap_w"] = "150";
  EXPECT_EQ(problem(j), "'safe_cap_w' must be a number");
  j = base;
  j["curve"]["min_cap_w"] = {{"w", 1}};
  const auto odd = parse_node_record(j.dump());
  ASSERT_TRUE(std::holds_alternative<NodeRecord>(odd));
  EXPECT_TRUE(std::isnan(std::get<NodeRecord>(odd).curve.min_cap_w));  // the curve check names it
  EXPECT_EQ(std::get<std::string>(parse_node_record(base.dump() + " x")), "not a JSON object");
  EXPECT_EQ(std::get<std::string>(parse_node_record("")), "not a JSON object");
  EXPECT_EQ(std::get<std::string>(parse_node_record("42")), "not a JSON object");
}

TEST(Schema, AllocationAndAcknowledgementRecordsReadBack) {
  const AllocRecord alloc{245.5, 17, 150.0, 300.0};
  const auto a = std::get<AllocRecord>(parse_alloc_record(to_json(alloc)));
  EXPECT_EQ(a.cap_w, 245.5);
  EXPECT_EQ(a.incarnation, 17);
  EXPECT_EQ(a.bound_w, 300.0);
  EXPECT_EQ(nlohmann::json::parse(to_json(alloc)),
            (nlohmann::json{{"cap_w", 245.5}, {"incarnation", 17}, {"safe_cap_w", 150.0}, {"bound_w", 300.0}}));
  const AckRecord ack{17, 901, 245.5, true};
  EXPECT_EQ(nlohmann::json::parse(to_json(ack)),
            (nlohmann::json{{"incarnation", 17}, {"revision", 901}, {"cap_w", 245.5}, {"leaving", true}}));
  const auto k = std::get<AckRecord>(parse_ack_record(to_json(ack)));
  EXPECT_EQ(k.revision, 901);
  EXPECT_TRUE(k.leaving);
  EXPECT_EQ(nlohmann::json::parse(to_json(ForgetRecord{17})), (nlohmann::json{{"incarnation", 17}}));
  EXPECT_EQ(std::get<ForgetRecord>(parse_forget_record(to_json(ForgetRecord{17}))).incarnation, 17);
  EXPECT_EQ(std::get<std::string>(parse_forget_record(R"({"incarnation": "17"})")), "'incarnation' must be an integer");
  EXPECT_EQ(std::get<std::string>(parse_forget_record("17")), "not a JSON object");
}

TEST(Schema, NamesAreCheckedAndKeysLiveUnderTheCluster) {
  EXPECT_TRUE(valid_name("node-01.a_b"));
  EXPECT_FALSE(valid_name(""));
  EXPECT_FALSE(valid_name("a/b"));
  EXPECT_FALSE(valid_name(std::string(129, 'a')));
  test::expect_error_from([] { (void)Keys("row 1"); }, ErrorCode::usage, "cluster name 'row 1' must be 1-128 characters");
  const Keys keys("row1");
  EXPECT_EQ(keys.alloc("n1"), "/gpucap/row1/alloc/n1");
  EXPECT_EQ(keys.forget("n1"), "/gpucap/row1/forget/n1");
  EXPECT_EQ(Keys::id_under("/gpucap/row1/nodes/n7", keys.nodes_prefix()), "n7");
  EXPECT_EQ(Keys::id_under("/gpucap/row1/nodes/bad name", keys.nodes_prefix()), std::nullopt);
  EXPECT_EQ(Keys::id_under("/gpucap/row2/nodes/n7", keys.nodes_prefix()), std::nullopt);
}

}  // namespace
}  // namespace gpucap::cluster
