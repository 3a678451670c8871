# Warnings for every gpucap target; errors in CI (GPUCAP_WARNINGS_AS_ERRORS).
add_library(gpucap_warnings INTERFACE)
target_compile_options(gpucap_warnings INTERFACE
  -Wall -Wextra -Wpedantic -Wshadow -Wconversion -Wsign-conversion
  -Wnon-virtual-dtor -Wold-style-cast -Woverloaded-virtual
  -Wimplicit-fallthrough)
if(GPUCAP_WARNINGS_AS_ERRORS)
  target_compile_options(gpucap_warnings INTERFACE -Werror)
endif()
# GCC 12 reports false -Wrestrict positives inside libstdc++'s std::string operator+ at -O2/-O3
# (GCC bug 105651, fixed in GCC 13); they would break the -Werror CI build on Debian 12.
if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND CMAKE_CXX_COMPILER_VERSION VERSION_LESS 13)
  target_compile_options(gpucap_warnings INTERFACE -Wno-restrict)
endif()
