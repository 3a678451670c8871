// The shared store: PostgreSQL through libpqxx, for several servers (replicas) on one database.
//
// Every change is one READ COMMITTED transaction that first locks the job's row
// (SELECT ... FOR UPDATE) and only then reads the job's trials: every writer of a job's trials
// holds that lock, so the trials read are the latest committed ones and two replicas can never
// hand out one trial number twice or apply one report twice. Registration inserts with
// ON CONFLICT DO NOTHING, so two replicas registering one job agree on a single row. Lost races
// (serialization failures, deadlocks) and lost connections are retried from the start.
//
// Durability::full leaves synchronous_commit as the server has it (on by default: a commit is in
// the WAL on disk before it returns); Durability::normal sets synchronous_commit=off on every
// connection, so a crash of the database server or its host may lose the last acknowledged
// commits (up to 3 x wal_writer_delay), never the database's consistency.

#include <fmt/format.h>

#include <pqxx/pqxx>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <thread>

#include "gpucap/core/error.hpp"
#include "gpucap/service/store.hpp"

namespace gpucap::service {
namespace {

// Connections per server process. Few: every connection is a PostgreSQL backend process, and more
// backends than the machine has cores to run them only queue on those cores (on the 2-core box,
// 16 connections gave a p99 four times that of 6 at 2,000 requests/s; docs/benchmarks.md).
std::size_t pool_size() {
  static const std::size_t size = std::clamp<std::size_t>(2 * std::thread::hardware_concurrency() + 2, 4, 32);
  return size;
}

const std::vector<std::string>& migrations() {
  static const std::vector<std::string> steps = {
      // 1: jobs and their trials.
      "CREATE TABLE jobs ("
      "  job_id TEXT PRIMARY KEY,"
      "  spec TEXT NOT NULL,"    // bso::to_json(JobSpec)
      "  fields TEXT NOT NULL,"  // bso::job_fields_to_json: stage, min cost, arms, random state
      "  created_at TIMESTAMPTZ NOT NULL DEFAULT now(),"
      "  updated_at TIMESTAMPTZ NOT NULL DEFAULT now());"
      "CREATE TABLE trials ("
      "  job_id TEXT NOT NULL REFERENCES jobs(job_id) ON DELETE CASCADE,"
      "  trial_number INTEGER NOT NULL,"
      "  batch_size INTEGER NOT NULL,"
      "  type TEXT NOT NULL,"
      "  status TEXT NOT NULL,"
      "  epochs INTEGER NOT NULL,"
      "  time_s DOUBLE PRECISION NOT NULL,"
      "  energy_j DOUBLE PRECISION NOT NULL,"
      "  last_epoch_time_s DOUBLE PRECISION NOT NULL,"
      "  last_epoch_energy_j DOUBLE PRECISION NOT NULL,"
      "  converged BOOLEAN,"  // NULL until the trial succeeded
      "  started_at TIMESTAMPTZ NOT NULL DEFAULT now(),"
      "  ended_at TIMESTAMPTZ,"
      "  PRIMARY KEY (job_id, trial_number));",
  };
  return steps;
}

// The URI without its password, for messages.
std::string redacted(const std::string& uri) {
  const auto scheme_end = uri.find("://");
  const auto at = uri.find('@');
  if (scheme_end == std::string::npos || at == std::string::npos || at < scheme_end) return uri;
  const auto colon = uri.find(':', scheme_end + 3);
  if (colon == std::string::npos || colon > at) return uri;
  return uri.substr(0, colon) + ":***" + uri.substr(at);
}

// Doubles travel as text: fmt's shortest form reads back to the same double, and the session's
// extra_float_digits makes PostgreSQL answer the same way, so a restarted server sees exactly the
// costs (and so takes exactly the decisions) the killed one would have.
std::string real_text(double x) { return fmt::format("{}", x); }

double real_of(const pqxx::field& field) {
  const char* text = field.c_str();
  char* end = nullptr;
  const double x = std::strtod(text, &end);
  if (end == text || *end != '\0') throw Error(ErrorCode::invalid_data, fmt::format("stored trial: '{}' is not a number", text));
  return x;
}

const char* converged_text(const std::optional<bool>& converged) {
  if (!converged) return nullptr;
  return *converged ? "true" : "false";
}

bso::Trial trial_from_row(const pqxx::row& row) {
  bso::Trial trial;
  trial.trial_number = row[0].as<int>();
  trial.batch_size = row[1].as<int>();
  trial.type = bso::parse_trial_type(row[2].c_str());
  trial.status = bso::parse_trial_status(row[3].c_str());
  trial.epochs = row[4].as<int>();
  trial.time_s = real_of(row[5]);
  trial.energy_j = real_of(row[6]);
  trial.last_epoch_time_s = real_of(row[7]);
  trial.last_epoch_energy_j = real_of(row[8]);
  if (!row[9].is_null()) trial.converged = row[9].as<bool>();
  return trial;
}

void prepare_statements(pqxx::connection& c) {
  c.prepare("select_job", "SELECT spec, fields FROM jobs WHERE job_id = $1");
  c.prepare("lock_job", "SELECT spec, fields FROM jobs WHERE job_id = $1 FOR UPDATE");
  c.prepare("select_trials",
            "SELECT trial_number, batch_size, type, status, epochs, time_s, energy_j, last_epoch_time_s,"
            " last_epoch_energy_j, converged FROM trials WHERE job_id = $1 ORDER BY trial_number");
  c.prepare("select_job_ids", "SELECT job_id FROM jobs ORDER BY job_id");
  c.prepare("insert_job", "INSERT INTO jobs (job_id, spec, fields) VALUES ($1, $2, $3) ON CONFLICT (job_id) DO NOTHING");
  c.prepare("update_fields", "UPDATE jobs SET fields = $2, updated_at = now() WHERE job_id = $1");
  c.prepare("delete_job", "DELETE FROM jobs WHERE job_id = $1");
  c.prepare("insert_trial",
            "INSERT INTO trials (job_id, trial_number, batch_size, type, status, epochs, time_s, energy_j,"
            " last_epoch_time_s, last_epoch_energy_j, converged, ended_at)"
            " VALUES ($1, $2, $3, $4, $5::text, $6, $7, $8, $9, $10, $11::boolean,"
            " CASE WHEN $5::text = 'Dispatched' THEN NULL ELSE now() END)");
  c.prepare("update_trial",
            "UPDATE trials SET status = $3::text, epochs = $4, time_s = $5, energy_j = $6, last_epoch_time_s = $7,"
            " last_epoch_energy_j = $8, converged = $9::boolean,"
            " ended_at = CASE WHEN $3::text = 'Dispatched' THEN NULL ELSE COALESCE(ended_at, now()) END"
            " WHERE job_id = $1 AND trial_number = $2");
}

// Connections, opened on demand up to pool_size and handed to one transaction at a time.
class ConnectionPool {
 public:
  ConnectionPool(std::string uri, Durability durability) : uri_(std::move(uri)), durability_(durability) {}

  class Lease {
   public:
    Lease(ConnectionPool& pool, std::unique_ptr<pqxx::connection> c) : pool_(pool), c_(std::move(c)) {}
    ~Lease() { pool_.give_back(std::move(c_)); }
    Lease(const Lease&) = delete;
    Lease& operator=(const Lease&) = delete;
    pqxx::connection& operator*() { return *c_; }
    // A broken connection is closed rather than handed out again.
    void discard() { c_.reset(); }

   private:
    ConnectionPool& pool_;
    std::unique_ptr<pqxx::connection> c_;
  };

  Lease acquire() {
    std::unique_lock lock(mutex_);
    available_.wait(lock, [&] { return !idle_.empty() || open_ < pool_size(); });
    if (!idle_.empty()) {
      auto c = std::move(idle_.back());
      idle_.pop_back();
      return Lease(*this, std::move(c));
    }
    ++open_;
    lock.unlock();
    try {
      return Lease(*this, connect());
    } catch (...) {
      give_back(nullptr);
      throw;
    }
  }

  std::unique_ptr<pqxx::connection> connect() const {
    auto c = std::make_unique<pqxx::connection>(uri_);
    pqxx::nontransaction session(*c);
    session.exec("SET extra_float_digits = 3");
    if (durability_ == Durability::normal) session.exec("SET synchronous_commit = off");
    session.commit();
    prepare_statements(*c);
    return c;
  }

 private:
  void give_back(std::unique_ptr<pqxx::connection> c) {
    {
      std::lock_guard lock(mutex_);
      if (c && c->is_open()) {
        idle_.push_back(std::move(c));
      } else {
        --open_;
      }
    }
    available_.notify_one();
  }

  std::string uri_;
  Durability durability_;
  std::mutex mutex_;
  std::condition_variable available_;
  std::vector<std::unique_ptr<pqxx::connection>> idle_;
  std::size_t open_ = 0;
};

class PostgresStore final : public Store {
 public:
  PostgresStore(std::string uri, Durability durability) : uri_(std::move(uri)), pool_(uri_, durability) {
    try {
      migrate();
    } catch (const pqxx::failure& e) {
      throw Error(ErrorCode::io, fmt::format("PostgreSQL {}: {}", redacted(uri_), trimmed(e.what())));
    }
  }

  std::optional<bso::JobSpec> insert_job(const bso::JobState& job) override {
    return transaction<std::optional<bso::JobSpec>>([&](pqxx::work& w) -> std::optional<bso::JobSpec> {
      const auto& id = job.spec.job_id;
      const auto inserted = w.exec_prepared("insert_job", id, spec_to_text(job.spec), fields_to_text(job));
      if (inserted.affected_rows() == 0) {
        // Another request (on this replica or another) registered it first; its row is committed.
        const auto row = w.exec_prepared("select_job", id);
        if (row.empty()) throw Error(ErrorCode::io, fmt::format("job {} vanished while being registered", id));
        return spec_from_text(row[0][0].c_str());
      }
      for (const auto& trial : job.trials) insert_trial(w, id, trial);
      return std::nullopt;
    });
  }

  bool update_job(const std::string& job_id, const std::function<void(bso::JobState&)>& operation) override {
    return transaction<bool>([&](pqxx::work& w) {
      auto before = load(w, job_id, "lock_job");
      if (!before) return false;
      auto after = *before;
      operation(after);
      const auto changes = diff_jobs(*before, after);
      if (changes.fields_changed) w.exec_prepared("update_fields", job_id, fields_to_text(after));
      for (const auto* trial : changes.inserted) insert_trial(w, job_id, *trial);
      for (const auto* trial : changes.updated) update_trial(w, job_id, *trial);
      return true;
    });
  }

  bool delete_job(const std::string& job_id) override {
    return transaction<bool>([&](pqxx::work& w) { return w.exec_prepared("delete_job", job_id).affected_rows() > 0; });
  }

  std::optional<bso::JobState> load_job(const std::string& job_id) override {
    return transaction<std::optional<bso::JobState>>([&](pqxx::work& w) { return load(w, job_id, "select_job"); });
  }

  std::vector<std::string> job_ids() override {
    return transaction<std::vector<std::string>>([&](pqxx::work& w) {
      std::vector<std::string> ids;
      for (const auto& row : w.exec_prepared("select_job_ids")) ids.emplace_back(row[0].c_str());
      return ids;
    });
  }

  int schema_version() override {
    return transaction<int>([&](pqxx::work& w) { return w.exec("SELECT COALESCE(MAX(version), 0) FROM schema_version")[0][0].as<int>(); });
  }

  std::string describe() const override { return fmt::format("PostgreSQL {}", redacted(uri_)); }

  std::string durability_setting() override {
    return transaction<std::string>(
        [&](pqxx::work& w) { return "synchronous_commit=" + std::string(w.exec("SHOW synchronous_commit")[0][0].c_str()); });
  }

 private:
  static std::string trimmed(std::string text) {
    while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
    return text;
  }

  Error failure(const std::string& what) const {
    return Error(ErrorCode::io, fmt::format("PostgreSQL {}: {}", redacted(uri_), trimmed(what)));
  }

  // Runs `body` in one transaction on a pooled connection, committing if it returns; a lost race
  // or a lost connection runs it again from the start. A connection lost during COMMIT leaves the
  // outcome unknown: that is an error, not a retry (the change may have been applied).
  template <typename Result, typename Body>
  Result transaction(const Body& body) {
    for (int attempt = 1;; ++attempt) {
      try {
        auto lease = pool_.acquire();
        try {
          pqxx::work w(*lease);
          Result result = body(w);
          w.commit();
          return result;
        } catch (const pqxx::in_doubt_error& e) {
          lease.discard();
          throw failure(e.what());
        } catch (const pqxx::broken_connection&) {
          lease.discard();
          throw;
        }
      } catch (const pqxx::transaction_rollback& e) {
        if (attempt >= max_transaction_attempts) throw failure(e.what());
      } catch (const pqxx::broken_connection& e) {
        if (attempt >= max_transaction_attempts) throw failure(e.what());
      } catch (const pqxx::failure& e) {
        throw failure(e.what());
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(attempt));
    }
  }

  // Takes the advisory lock first, so two servers starting at once on one database apply the
  // migrations one after the other (the second finds nothing to do).
  void migrate() {
    auto c = pool_.connect();
    pqxx::work w(*c);
    w.exec("SELECT pg_advisory_xact_lock(hashtext('gpucap.service.schema'))");
    w.exec("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER PRIMARY KEY,"
           " applied_at TIMESTAMPTZ NOT NULL DEFAULT now())");
    const int version = w.exec("SELECT COALESCE(MAX(version), 0) FROM schema_version")[0][0].as<int>();
    const int known = static_cast<int>(migrations().size());
    if (version > known) {
      throw Error(ErrorCode::invalid_data,
                  fmt::format("PostgreSQL {}: schema version {} is newer than this gpucap's ({})", redacted(uri_), version, known));
    }
    for (int v = version + 1; v <= known; ++v) {
      w.exec(migrations()[static_cast<std::size_t>(v - 1)]);
      w.exec(fmt::format("INSERT INTO schema_version (version) VALUES ({})", v));
    }
    w.commit();
  }

  static std::optional<bso::JobState> load(pqxx::work& w, const std::string& job_id, const char* statement) {
    const auto job_row = w.exec_prepared(statement, job_id);
    if (job_row.empty()) return std::nullopt;
    auto job = job_from_text(job_row[0][0].c_str(), job_row[0][1].c_str());
    for (const auto& row : w.exec_prepared("select_trials", job_id)) append_stored_trial(job, trial_from_row(row));
    return job;
  }

  static void insert_trial(pqxx::work& w, const std::string& job_id, const bso::Trial& t) {
    w.exec_prepared("insert_trial", job_id, t.trial_number, t.batch_size, std::string(bso::trial_type_name(t.type)),
                    std::string(bso::trial_status_name(t.status)), t.epochs, real_text(t.time_s), real_text(t.energy_j),
                    real_text(t.last_epoch_time_s), real_text(t.last_epoch_energy_j), converged_text(t.converged));
  }

  static void update_trial(pqxx::work& w, const std::string& job_id, const bso::Trial& t) {
    w.exec_prepared("update_trial", job_id, t.trial_number, std::string(bso::trial_status_name(t.status)), t.epochs,
                    real_text(t.time_s), real_text(t.energy_j), real_text(t.last_epoch_time_s),
                    real_text(t.last_epoch_energy_j), converged_text(t.converged));
  }

  std::string uri_;
  ConnectionPool pool_;
};

}  // namespace

std::unique_ptr<Store> open_postgres_store(const std::string& uri, Durability durability) {
  return std::make_unique<PostgresStore>(uri, durability);
}

}  // namespace gpucap::service
