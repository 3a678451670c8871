#pragma once
// A full disk for end-to-end tests: a 256 KiB tmpfs, mounted in a mount namespace of the test's
// own (`unshare -m` as root, `unshare -rm` — a user namespace that may mount — otherwise), so the
// mount dies with the command and nothing outlives the test. A file of known content is put on
// it as the "previous" output, the rest is filled but for `free_kib`, then gpucap runs there.
// Where no tmpfs can be mounted the test fails, saying why: a fault test that skips tests nothing.

#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "gpucap/core/files.hpp"
#include "support/cli_runner.hpp"
#include "support/paths.hpp"

namespace gpucap::test {

struct SmallDiskRun {
  bool mounted = false;
  std::string mount_error;
  int exit_code = -1;
  std::string out, err;
  std::string previous_after;  // the previous file as the command left it ("" if it is gone)
  std::vector<std::string> files;  // what the disk holds afterwards, but the filler
};

// Puts `previous` at DISK/`name`, fills the disk but for `free_kib`, runs `gpucap --data-dir DATA
// ARGS...` (every "{DISK}" in ARGS is the disk's folder) with at most `timeout_s`, `env` (NAME=VALUE
// with "{DISK}") set for it.
inline SmallDiskRun run_on_full_disk(const std::string& name, const std::string& previous, int free_kib,
                                     const std::vector<std::string>& args, int timeout_s = 120,
                                     const std::vector<std::string>& env = {}) {
  TempDir dir;
  const auto disk = dir.file("disk");
  std::filesystem::create_directories(disk);
  const auto expand = [&disk](std::string text) {
    for (auto at = text.find("{DISK}"); at != std::string::npos; at = text.find("{DISK}", at + disk.size())) {
      text.replace(at, 6, disk);
    }
    return text;
  };
  const auto previous_file = dir.write("previous", previous);
  std::string command = "exec timeout " + std::to_string(timeout_s) + " env";
  for (const auto& e : env) command += " " + quote(expand(e));
  command += " " + quote(GPUCAP_CLI_PATH) + " --data-dir " + quote(data_dir());
  for (const auto& arg : args) command += " " + quote(expand(arg));
  const std::string script =
      "D=" + quote(disk) + "; O=" + quote(dir.path()) + "\n" +
      "mount -t tmpfs -o size=256k tmpfs \"$D\" 2>\"$O/mount-error\" || exit 97\n"
      "mkdir -p \"$(dirname \"$D\"/" + quote(name) + ")\" && cp " + quote(previous_file) + " \"$D\"/" + quote(name) +
      " || exit 98\n"
      "dd if=/dev/zero of=\"$D/filler\" bs=4k 2>/dev/null\n"
      "truncate -s -" + std::to_string(free_kib) + "K \"$D/filler\" || exit 98\n"
      "(" + command + ") >\"$O/out\" 2>\"$O/err\"\n"
      "echo $? >\"$O/rc\"\n"
      "cp \"$D\"/" + quote(name) + " \"$O/after\" 2>/dev/null\n"
      "(cd \"$D\" && find . -type f | sed 's|^[.]/||' | sort) >\"$O/listing\"\n";
  const auto script_file = dir.write("script.sh", script);
  const std::string unshare = geteuid() == 0 ? "unshare -m" : "unshare -rm";
  const int status = std::system((unshare + " sh " + quote(script_file) + " 2>" + quote(dir.file("unshare-error"))).c_str());
  SmallDiskRun run;
  const int code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  if (code == 97 || !std::filesystem::exists(dir.file("rc"))) {
    run.mount_error = (std::filesystem::exists(dir.file("mount-error")) ? read_text_file(dir.file("mount-error")) : "") +
                      read_text_file(dir.file("unshare-error"));
    return run;
  }
  run.mounted = true;
  run.exit_code = std::stoi(read_text_file(dir.file("rc")));
  run.out = read_text_file(dir.file("out"));
  run.err = read_text_file(dir.file("err"));
  if (std::filesystem::exists(dir.file("after"))) run.previous_after = read_text_file(dir.file("after"));
  const auto listing = read_text_file(dir.file("listing"));
  for (std::size_t start = 0; start < listing.size();) {
    auto end = listing.find('\n', start);
    if (end == std::string::npos) end = listing.size();
    const auto entry = listing.substr(start, end - start);
    if (!entry.empty() && entry != "filler") run.files.push_back(entry);
    start = end + 1;
  }
  return run;
}

// The checks every full-disk test makes: it ran on a tmpfs, failed with one clear line that
// names the file it could not write (`failed`; when that file existed before, the line says it is
// unchanged) and the cause, and left the previous file `name` byte for byte and no partial file.
inline void expect_failed_cleanly(const SmallDiskRun& run, const std::string& name, const std::string& previous,
                                  const std::string& failed, bool failed_existed) {
  ASSERT_TRUE(run.mounted) << "cannot mount a small tmpfs for the full-disk test (neither as root nor with "
                              "unshare -rm): "
                           << run.mount_error;
  EXPECT_NE(run.exit_code, 0) << run.err;
  EXPECT_NE(run.exit_code, 124) << "the command did not end by itself: " << run.err;
  EXPECT_NE(run.err.find("No space left on device"), std::string::npos) << run.err;
  EXPECT_NE(run.err.find("/" + failed + ": cannot write"), std::string::npos) << run.err;
  EXPECT_EQ(run.err.find("the previous file is unchanged") != std::string::npos, failed_existed) << run.err;
  const auto error_line = run.err.find("gpucap: error: ");
  ASSERT_NE(error_line, std::string::npos) << run.err;
  EXPECT_EQ(run.err.find('\n', error_line), run.err.size() - 1) << "one line, the last: " << run.err;
  EXPECT_EQ(run.previous_after, previous) << "the previous " << name << " was changed";
  for (const auto& file : run.files) EXPECT_EQ(file.find(".partial-"), std::string::npos) << "left behind on the disk: " << file;
}

}  // namespace gpucap::test
