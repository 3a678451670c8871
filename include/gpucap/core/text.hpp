#pragma once
// Small text helpers shared by the file readers and the CLI.

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gpucap {

[[nodiscard]] std::string_view trim(std::string_view text);
[[nodiscard]] std::vector<std::string_view> split(std::string_view text, char separator);
[[nodiscard]] std::string to_lower(std::string_view text);

// Lower-case letters and digits only: "MobilenetV1_05", "mobilenet-v1-0.5" → "mobilenetv105".
// Used to match user-typed names against catalogue ids and aliases.
[[nodiscard]] std::string name_key(std::string_view text);

// Whole-string parses (leading/trailing blanks allowed); nullopt on anything else, incl. NaN/inf.
[[nodiscard]] std::optional<double> parse_double(std::string_view text);
[[nodiscard]] std::optional<long long> parse_integer(std::string_view text);

[[nodiscard]] std::string join(const std::vector<std::string>& parts, std::string_view separator);

// Control characters (below 0x20, 0x7f, and the C1 controls U+0080 to U+009F in UTF-8) written as
// \xNN: text from outside, such as a request's path, cannot then start a forged line in a log or
// move a terminal's cursor.
[[nodiscard]] std::string escape_control(std::string_view text);

}  // namespace gpucap
