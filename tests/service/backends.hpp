#pragma once
// The two stores, as test parameters: a fresh SQLite file in the test's temporary folder, or a
// fresh database on the test process's private PostgreSQL server.

#include <gtest/gtest.h>

#include <string>

#include "service/private_postgres.hpp"
#include "support/paths.hpp"

namespace gpucap::test {

enum class Backend { sqlite, postgres };

inline std::string backend_name(const ::testing::TestParamInfo<Backend>& info) {
  return info.param == Backend::sqlite ? "SQLite" : "PostgreSQL";
}

// A --db URL for an empty database of that kind.
inline std::string fresh_database(Backend backend, const TempDir& dir, const std::string& name = "bso.db") {
  if (backend == Backend::sqlite) return "sqlite:" + dir.file(name);
  return private_postgres().new_database();
}

}  // namespace gpucap::test
