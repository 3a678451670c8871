#pragma once
// Where `gpucap bso serve` keeps its jobs: an embedded SQLite file (one server) or PostgreSQL
// (several replicas behind one address). Every change to a job is one transaction that locks the
// job, loads it with all its trials, runs one optimizer operation on it and writes back what the
// operation changed — so replicas never hand out one trial number twice, and a server killed at
// any moment loses nothing it acknowledged (a power cut neither, with Durability::full).

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gpucap/bso/state.hpp"

namespace gpucap::service {

// How far a commit has gone towards the disk when the request that made it is answered
// (`gpucap bso serve --durability`).
enum class Durability {
  // SQLite: synchronous=FULL, every commit fsync'd before it returns, so an acknowledged trial
  // survives a power cut or a kernel crash. PostgreSQL: the server's own synchronous_commit
  // (on, i.e. flushed to its WAL on disk, unless its administrator turned it off).
  full,
  // SQLite: synchronous=NORMAL (WAL): a commit is in the operating system's page cache when it
  // returns, so it survives a crash or SIGKILL of the server, but a power cut or kernel crash may
  // lose the last acknowledged trials (never the database itself). PostgreSQL:
  // synchronous_commit=off for the server's sessions: a crash of the database server or of its
  // host may lose the last acknowledged trials (up to three times wal_writer_delay, 0.6 s by
  // default), never the database's consistency; a crash of gpucap loses nothing.
  normal,
};

// "full" or "normal"; Error(usage) naming the flag for anything else.
[[nodiscard]] Durability parse_durability(std::string_view text);
[[nodiscard]] const char* to_string(Durability durability);

class Store {
 public:
  virtual ~Store() = default;
  Store() = default;
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  // Inserts `job` (its spec.job_id set) unless a job with that id exists; race-free across
  // replicas. Returns nullopt when it inserted the job, else the spec stored under that id.
  [[nodiscard]] virtual std::optional<bso::JobSpec> insert_job(const bso::JobState& job) = 0;

  // One transaction: locks the job, loads it with its trials, runs `operation` on it and writes
  // back the job's fields and every trial the operation added or changed. If `operation` throws,
  // nothing is written and the exception propagates. Returns false (without calling
  // `operation`) when there is no such job. A transaction that loses a race with another
  // writer (busy database, serialization failure, deadlock, lost connection) is run again from
  // the start a bounded number of times, so `operation` must depend only on the job it is given.
  virtual bool update_job(const std::string& job_id, const std::function<void(bso::JobState&)>& operation) = 0;

  // Deletes the job and its trials; false when there was no such job.
  virtual bool delete_job(const std::string& job_id) = 0;

  // The job as stored (for tests and tools), or nullopt.
  [[nodiscard]] virtual std::optional<bso::JobState> load_job(const std::string& job_id) = 0;
  [[nodiscard]] virtual std::vector<std::string> job_ids() = 0;

  // The schema version the database is at (after the migrations ran at open).
  [[nodiscard]] virtual int schema_version() = 0;
  // "SQLite bso.db", "PostgreSQL 127.0.0.1:5432/bso": for the line the server prints.
  [[nodiscard]] virtual std::string describe() const = 0;
  // The setting in force, read back from the database on the store's connection:
  // "synchronous=FULL" or "synchronous=NORMAL" (SQLite's PRAGMA synchronous),
  // "synchronous_commit=on" or "synchronous_commit=off" (PostgreSQL's SHOW synchronous_commit);
  // empty for a store that is no database (the tests' in-memory stores).
  [[nodiscard]] virtual std::string durability_setting() { return {}; }
};

// The schema version this gpucap creates and understands.
inline constexpr int current_schema_version = 1;

// --db: "sqlite:PATH" or a libpq URI "postgresql://..." / "postgres://...". Opens the database
// and brings its schema up to date; Error(usage) for another form, Error(io) when it cannot be
// opened, Error(invalid_data) when its schema is newer than this gpucap.
[[nodiscard]] std::unique_ptr<Store> open_store(const std::string& url, Durability durability = Durability::full);
// The two kinds, by path (a new file is created) or libpq URI.
[[nodiscard]] std::unique_ptr<Store> open_sqlite_store(const std::string& path, Durability durability = Durability::full);
[[nodiscard]] std::unique_ptr<Store> open_postgres_store(const std::string& uri, Durability durability = Durability::full);

// How many times a transaction that lost a race is run before the request fails.
inline constexpr int max_transaction_attempts = 8;

// What an operation did to a job: the store writes back only this.
struct JobChanges {
  bool fields_changed = false;
  std::vector<const bso::Trial*> inserted;  // trials the operation appended
  std::vector<const bso::Trial*> updated;   // trials that existed and changed
};
// Throws Error(internal) if `after` dropped or renumbered a trial of `before`.
[[nodiscard]] JobChanges diff_jobs(const bso::JobState& before, const bso::JobState& after);

// The spec as stored (bso::to_json) and back; the reading side throws Error(invalid_data).
[[nodiscard]] std::string spec_to_text(const bso::JobSpec& spec);
[[nodiscard]] bso::JobSpec spec_from_text(const std::string& text);
[[nodiscard]] std::string fields_to_text(const bso::JobState& job);
void fields_from_text(const std::string& text, bso::JobState& job);
// A job read back from its row (no trials yet) and its trials, row by row in trial order;
// Error(invalid_data) for a damaged row or a gap in the trial numbers.
[[nodiscard]] bso::JobState job_from_text(const std::string& spec, const std::string& fields);
void append_stored_trial(bso::JobState& job, const bso::Trial& trial);

}  // namespace gpucap::service
