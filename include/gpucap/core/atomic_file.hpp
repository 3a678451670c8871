#pragma once
// A file written as a stream and put in place whole: every output file gpucap writes (traces,
// trial files, reports, the restore journal) goes through this, so a failure (a full disk, a
// kill) never leaves the previous file cut short or half replaced.
//
// The text goes into a temporary file in the target's own folder, "<path>.partial-XXXXXX", as it
// is written (no buffering in the process: a streamed trace is on disk row by row); commit()
// syncs and closes it, checking both, renames it over the target and syncs the folder. A write
// that fails (ENOSPC, EIO, EFBIG ...) removes the temporary file and throws Error(io) in one line
// that names the file and says the previous one is unchanged. A writer destroyed without commit()
// removes its temporary file, or, with Unfinished::keep, leaves it where it is and says so in a
// warning: a run that failed half-way keeps what it measured, next to the untouched target.
// A path that names no regular file (/dev/stdout, a pipe) is written straight through.

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace gpucap {

class AtomicFileWriter {
 public:
  // What a writer destroyed before commit() leaves behind.
  enum class Unfinished { remove, keep };
  enum class Durability { flush, sync };  // sync: fsync of the file and its folder at commit()

  // Creates the temporary file; throws Error(io) naming `path` when it cannot.
  explicit AtomicFileWriter(std::string path, Durability durability = Durability::sync,
                            Unfinished unfinished = Unfinished::remove);
  ~AtomicFileWriter();
  AtomicFileWriter(const AtomicFileWriter&) = delete;
  AtomicFileWriter& operator=(const AtomicFileWriter&) = delete;

  void write(std::string_view text);
  // Puts the file in place. After it, or after a failure, the writer takes no more text.
  void commit();

  [[nodiscard]] const std::string& path() const { return path_; }
  [[nodiscard]] const std::string& temporary_path() const { return temporary_; }

 private:
  [[noreturn]] void fail(const char* what, int error);

  std::string path_;
  std::string target_;     // the file replaced: path_, or the file a symbolic link at path_ names
  std::string temporary_;
  Durability durability_;
  Unfinished unfinished_;
  bool target_existed_ = false;
  int fd_ = -1;
  std::size_t bytes_ = 0;
  bool done_ = false;    // committed or failed
  bool direct_ = false;  // path_ is no regular file (a pipe, a terminal): written straight through
};

// Files that belong together (a result set: summary.csv, summary.json, report.md), as (path,
// text): each is written in full to its temporary file before any is put in place, then they are
// put in place in the order given. A failure while writing (a full disk) replaces none of them.
void write_text_files(const std::vector<std::pair<std::string, std::string>>& files);

}  // namespace gpucap
