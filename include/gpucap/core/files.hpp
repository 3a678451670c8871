#pragma once
// Reading, writing and listing files, with errors that name the file.

#include <string>
#include <string_view>
#include <vector>

namespace gpucap {

// Reads a whole regular file (at most 256 MiB); throws Error(io) naming the file when it cannot be
// read or is not a regular file.
[[nodiscard]] std::string read_text_file(const std::string& path);

// Writes a file atomically (temporary file + rename) so a failure never leaves half a file;
// throws Error(io) naming the file.
void write_text_file(const std::string& path, std::string_view content);

// write_text_file, and the data and the rename reach the disk (fsync of the file and its folder)
// before it returns: for files that must survive a crash or a power cut (the restore journal).
void write_text_file_durably(const std::string& path, std::string_view content);

// Regular files in `dir` (not recursive) whose name ends in `extension` (e.g. ".json"), sorted
// by path. Throws Error(io) if the folder cannot be listed.
[[nodiscard]] std::vector<std::string> list_files(const std::string& dir, std::string_view extension);

}  // namespace gpucap
