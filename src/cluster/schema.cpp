#include "gpucap/cluster/schema.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <array>
#include <cmath>
#include <iterator>
#include <limits>

#include "gpucap/core/error.hpp"

namespace gpucap::cluster {

namespace {

using nlohmann::json;

// Reads a finite number at `key`; a message on failure.
std::optional<std::string> read_number(const json& j, const char* key, double& out) {
  const auto it = j.find(key);
  if (it == j.end() || !it->is_number()) return fmt::format("'{}' must be a number", key);
  out = it->get<double>();
  if (!std::isfinite(out)) return fmt::format("'{}' is not finite", key);
  return std::nullopt;
}

std::optional<std::string> read_integer(const json& j, const char* key, std::int64_t& out) {
  const auto it = j.find(key);
  if (it == j.end() || !it->is_number_integer()) return fmt::format("'{}' must be an integer", key);
  out = it->get<std::int64_t>();
  return std::nullopt;
}

template <typename T, typename F>
Parsed<T> parse_object(std::string_view text, F fill) {
  const auto j = json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return std::string("not a JSON object");
  T record;
  if (auto problem = fill(j, record)) return *problem;
  return record;
}

}  // namespace

bool valid_name(std::string_view name) {
  if (name.empty() || name.size() > 128) return false;
  for (const char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
                    c == '_' || c == '-';
    if (!ok) return false;
  }
  return true;
}

void check_name(std::string_view name, const char* what) {
  if (!valid_name(name)) {
    throw usage_error(fmt::format("{} '{}' must be 1-128 characters of letters, digits, '.', '_' or '-'", what, name));
  }
}

Keys::Keys(std::string cluster) {
  check_name(cluster, "cluster name");
  root_ = "/gpucap/" + cluster + "/";
}

std::optional<std::string> Keys::id_under(std::string_view key, std::string_view prefix) {
  if (!key.starts_with(prefix)) return std::nullopt;
  const auto id = key.substr(prefix.size());
  if (!valid_name(id)) return std::nullopt;
  return std::string(id);
}

namespace {

// A number as JSON: the shortest text that reads back as the same double; null for NaN or an
// infinity (JSON has neither: the reader takes null for NaN and the curve's validation names it).
void append_number(std::string& out, double value) {
  if (std::isfinite(value)) {
    fmt::format_to(std::back_inserter(out), "{}", value);
  } else {
    out += "null";
  }
}

}  // namespace

std::string to_json(const NodeRecord& record) {
  // Written by hand rather than through a JSON tree: a node publishes its curve every time its
  // load changes, and with thousands of nodes the tree's allocations were a third of the
  // simulator's time. The same document as json{...}.dump() would give.
  std::string out;
  out.reserve(200 + 40 * record.curve.points.size());
  out += "{\"cap_in_force_w\":";
  append_number(out, record.cap_in_force_w);
  out += ",\"curve\":{\"max_cap_w\":";
  append_number(out, record.curve.max_cap_w);
  out += ",\"min_cap_w\":";
  append_number(out, record.curve.min_cap_w);
  out += ",\"points\":[";
  for (std::size_t i = 0; i < record.curve.points.size(); ++i) {
    const auto& p = record.curve.points[i];
    out += i == 0 ? "[" : ",[";
    append_number(out, p.cap_w);
    out += ',';
    append_number(out, p.throughput);
    out += ',';
    append_number(out, p.slo_attainment);
    out += ']';
  }
  out += "],\"priority\":";
  append_number(out, record.curve.priority);
  out += ",\"tdp_w\":";
  append_number(out, record.curve.tdp_w);
  out += "},\"gpu\":";
  out += json(record.gpu).dump();
  out += ",\"incarnation\":";
  out += std::to_string(record.incarnation);
  out += ",\"model\":";
  out += json(record.model).dump();
  out += ",\"safe_cap_w\":";
  append_number(out, record.safe_cap_w);
  out += '}';
  return out;
}

// The allocation and acknowledgement records are written by hand too: a re-allocation of 10,000
// nodes writes 10,000 of them in one plan, and the JSON trees were half of a round's CPU.
std::string to_json(const AllocRecord& record) {
  std::string out = "{\"bound_w\":";
  append_number(out, record.bound_w);
  out += ",\"cap_w\":";
  append_number(out, record.cap_w);
  fmt::format_to(std::back_inserter(out), ",\"incarnation\":{},\"safe_cap_w\":", record.incarnation);
  append_number(out, record.safe_cap_w);
  out += '}';
  return out;
}

std::string to_json(const AckRecord& record) {
  std::string out = "{\"cap_w\":";
  append_number(out, record.cap_w);
  fmt::format_to(std::back_inserter(out), ",\"incarnation\":{},\"leaving\":{},\"revision\":{}}}", record.incarnation,
                 record.leaving, record.revision);
  return out;
}

std::string to_json(const ForgetRecord& record) { return fmt::format("{{\"incarnation\":{}}}", record.incarnation); }

std::string budget_json(double budget_w) { return json{{"budget_w", budget_w}}.dump(); }

namespace {

// Reads a NodeRecord straight from the parser's events (SAX) instead of through a JSON tree: the
// coordinator reads every curve every time a node publishes one, and with thousands of nodes the
// tree's allocations dominated its time. Same rules and messages as a tree reader: unknown keys
// are skipped, a curve's number that is not a number (a NaN arrives as null) reads as NaN for the
// curve's validation to name.
class NodeRecordReader final : public json::json_sax_t {
 public:
  std::optional<std::string> finish(NodeRecord& r) const {
    if (!object_) return std::string("not a JSON object");
    if (bad_incarnation_ || !seen_incarnation_) return std::string("'incarnation' must be an integer");
    if (!seen_safe_) return std::string("'safe_cap_w' must be a number");
    if (!seen_in_force_) return std::string("'cap_in_force_w' must be a number");
    if (record_.safe_cap_w < 0.0 || record_.cap_in_force_w < 0.0) return std::string("caps must not be negative");
    if (!curve_object_) return std::string("'curve' must be an object");
    static constexpr std::array<const char*, 4> kCurveKeys = {"min_cap_w", "max_cap_w", "priority", "tdp_w"};
    for (std::size_t i = 0; i < kCurveKeys.size(); ++i) {
      if (!curve_seen_[i]) return fmt::format("curve: '{}' is missing", kCurveKeys[i]);
    }
    if (!points_array_) return std::string("curve: 'points' must be an array");
    if (bad_point_) return std::string("curve: each point must be [cap_w, throughput, slo_attainment]");
    r = record_;
    return std::nullopt;
  }

  bool null() override { return scalar(std::numeric_limits<double>::quiet_NaN(), false, false); }
  bool boolean(bool /*val*/) override { return scalar(std::numeric_limits<double>::quiet_NaN(), false, false); }
  bool number_integer(number_integer_t val) override { return scalar(static_cast<double>(val), true, true, val); }
  bool number_unsigned(number_unsigned_t val) override {
    const bool fits = val <= static_cast<number_unsigned_t>(std::numeric_limits<std::int64_t>::max());
    return scalar(static_cast<double>(val), true, fits, fits ? static_cast<std::int64_t>(val) : 0);
  }
  bool number_float(number_float_t val, const string_t& /*s*/) override { return scalar(val, true, false); }
  bool string(string_t& val) override {
    if (skip_ == 0 && depth_ == 1) {
      if (key_ == "gpu") record_.gpu = val;
      if (key_ == "model") record_.model = val;
    }
    return scalar(std::numeric_limits<double>::quiet_NaN(), false, false);
  }
  bool binary(binary_t& /*val*/) override { return scalar(std::numeric_limits<double>::quiet_NaN(), false, false); }
  bool key(string_t& val) override {
    if (skip_ == 0) key_ = val;
    return true;
  }
  bool start_object(std::size_t /*elements*/) override {
    nested_value();
    if (skip_ > 0 || !(depth_ == 0 || (depth_ == 1 && key_ == "curve" && !in_curve_ && !curve_object_))) {
      return open_skipped();
    }
    if (depth_ == 0) {
      object_ = true;
    } else {
      in_curve_ = curve_object_ = true;
    }
    ++depth_;
    return true;
  }
  bool end_object() override {
    if (skip_ > 0) return close_skipped();
    --depth_;
    if (depth_ == 1) in_curve_ = false;
    return true;
  }
  bool start_array(std::size_t /*elements*/) override {
    if (skip_ == 0 && depth_ == 2 && in_curve_ && key_ == "points") {
      points_array_ = true;
      in_points_ = true;
      record_.curve.points.clear();
      ++depth_;
      return true;
    }
    if (skip_ == 0 && depth_ == 3 && in_points_) {
      in_point_ = true;
      point_values_ = 0;
      ++depth_;
      return true;
    }
    nested_value();
    return open_skipped();
  }
  bool end_array() override {
    if (skip_ > 0) return close_skipped();
    --depth_;
    if (in_point_) {
      in_point_ = false;
      if (point_values_ != 3) bad_point_ = true;
      record_.curve.points.push_back(point_);
    } else {
      in_points_ = false;
    }
    return true;
  }
  bool parse_error(std::size_t /*position*/, const std::string& /*last_token*/,
                   const nlohmann::detail::exception& /*ex*/) override {
    object_ = false;
    return false;
  }

 private:
  // An object or array where the record has none (it is skipped): what a tree reader would say.
  void nested_value() {
    if (skip_ > 0) return;
    if (in_point_ || (in_points_ && !in_point_ && depth_ == 3)) bad_point_ = true;
    if (in_curve_ && depth_ == 2) curve_scalar(std::numeric_limits<double>::quiet_NaN());
    if (depth_ == 1 && key_ == "curve" && (in_curve_ || curve_object_)) return;
    if (depth_ == 1 && key_ == "curve") curve_object_ = false;
  }
  void curve_scalar(double v) {
    if (key_ == "min_cap_w") curve_seen_[0] = true, record_.curve.min_cap_w = v;
    if (key_ == "max_cap_w") curve_seen_[1] = true, record_.curve.max_cap_w = v;
    if (key_ == "priority") curve_seen_[2] = true, record_.curve.priority = v;
    if (key_ == "tdp_w") curve_seen_[3] = true, record_.curve.tdp_w = v;
  }
  bool open_skipped() {
    ++skip_;
    return true;
  }
  bool close_skipped() {
    --skip_;
    return true;
  }
  // A value other than an object or an array, where the record's rules place it.
  bool scalar(double number, bool is_number, bool is_integer, std::int64_t integer = 0) {
    if (skip_ > 0) return true;
    if (depth_ == 0) {
      object_ = false;
      return true;
    }
    if (in_point_) {
      const double v = is_number ? number : std::numeric_limits<double>::quiet_NaN();
      if (point_values_ == 0) point_.cap_w = v;
      if (point_values_ == 1) point_.throughput = v;
      if (point_values_ == 2) point_.slo_attainment = v;
      ++point_values_;
      return true;
    }
    if (in_points_) {
      bad_point_ = true;  // a point that is not an array
      return true;
    }
    if (in_curve_ && depth_ == 2) {
      curve_scalar(is_number ? number : std::numeric_limits<double>::quiet_NaN());
      if (key_ == "points") points_array_ = false;
      return true;
    }
    if (depth_ == 1) {
      if (key_ == "incarnation") {
        seen_incarnation_ = true;
        bad_incarnation_ = !is_integer;
        record_.incarnation = integer;
      } else if (key_ == "safe_cap_w") {
        seen_safe_ = is_number;
        record_.safe_cap_w = number;
      } else if (key_ == "cap_in_force_w") {
        seen_in_force_ = is_number;
        record_.cap_in_force_w = number;
      } else if (key_ == "curve") {
        curve_object_ = false;
      }
    }
    return true;
  }

  NodeRecord record_;
  std::string key_;
  int depth_ = 0;
  int skip_ = 0;
  bool object_ = false;
  bool seen_incarnation_ = false, bad_incarnation_ = false, seen_safe_ = false, seen_in_force_ = false;
  bool curve_object_ = false, in_curve_ = false;
  std::array<bool, 4> curve_seen_{};
  bool points_array_ = false, in_points_ = false, in_point_ = false, bad_point_ = false;
  CurvePoint point_;
  int point_values_ = 0;
};

}  // namespace

Parsed<NodeRecord> parse_node_record(std::string_view text) {
  NodeRecordReader reader;
  // Strict: the whole text is one JSON value (trailing garbage is a parse error, as for a tree).
  (void)json::sax_parse(text.begin(), text.end(), &reader, nlohmann::detail::input_format_t::json, true);
  NodeRecord record;
  if (auto problem = reader.finish(record)) return *problem;
  return record;
}

Parsed<AllocRecord> parse_alloc_record(std::string_view text) {
  return parse_object<AllocRecord>(text, [](const json& j, AllocRecord& r) -> std::optional<std::string> {
    if (auto p = read_number(j, "cap_w", r.cap_w)) return p;
    if (auto p = read_number(j, "safe_cap_w", r.safe_cap_w)) return p;
    if (auto p = read_number(j, "bound_w", r.bound_w)) return p;
    if (r.cap_w < 0.0 || r.safe_cap_w < 0.0) return std::string("caps must not be negative");
    if (r.bound_w < r.cap_w) return std::string("'bound_w' must be at least 'cap_w'");
    return read_integer(j, "incarnation", r.incarnation);
  });
}

Parsed<AckRecord> parse_ack_record(std::string_view text) {
  return parse_object<AckRecord>(text, [](const json& j, AckRecord& r) -> std::optional<std::string> {
    if (auto p = read_integer(j, "incarnation", r.incarnation)) return p;
    if (auto p = read_integer(j, "revision", r.revision)) return p;
    if (auto p = read_number(j, "cap_w", r.cap_w)) return p;
    if (r.cap_w < 0.0) return std::string("'cap_w' must not be negative");
    if (const auto it = j.find("leaving"); it != j.end()) {
      if (!it->is_boolean()) return std::string("'leaving' must be true or false");
      r.leaving = it->get<bool>();
    }
    return std::nullopt;
  });
}

Parsed<ForgetRecord> parse_forget_record(std::string_view text) {
  return parse_object<ForgetRecord>(
      text, [](const json& j, ForgetRecord& r) { return read_integer(j, "incarnation", r.incarnation); });
}

Parsed<double> parse_budget(std::string_view text) {
  const auto j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return std::string("not a JSON object");
  double budget = 0.0;
  if (auto p = read_number(j, "budget_w", budget)) return *p;
  if (budget < 0.0) return fmt::format("budget {:g} W is negative", budget);
  if (budget > kMaxBudgetW) return fmt::format("budget {:g} W is absurd (more than {:g} W)", budget, kMaxBudgetW);
  return budget;
}

}  // namespace gpucap::cluster
