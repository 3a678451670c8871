#pragma once
// `call` must throw gpucap::Error with `code` and a message containing `fragment`.

#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "gpucap/core/error.hpp"

namespace gpucap::test {

inline void expect_error_from(const std::function<void()>& call, ErrorCode code, const std::string& fragment) {
  try {
    call();
    ADD_FAILURE() << "no error; expected one containing: " << fragment;
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), code) << e.what();
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
  }
}

}  // namespace gpucap::test
