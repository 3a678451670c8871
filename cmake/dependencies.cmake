# All dependencies come from Debian packages (scripts/setup.sh installs them).
find_package(fmt REQUIRED)
find_package(spdlog REQUIRED)
find_package(nlohmann_json 3.10 REQUIRED)
find_package(CLI11 REQUIRED)
find_package(Threads REQUIRED)
find_package(Ceres 2.0 REQUIRED)  # calibration of the twin (least squares)
# dlib (libdlib-dev): kernel ridge regression for the residuals of gpucap's fitted predictor
# (src/predict/fitted_fit.cpp); linked PRIVATE to gpucap_predict in src/ (no public header includes it).
find_package(dlib 19.21 REQUIRED)
if(GPUCAP_BUILD_TESTS)
  find_package(GTest REQUIRED)
endif()
if(GPUCAP_BUILD_BENCHMARKS)
  find_package(benchmark REQUIRED)
endif()

# The LibTorch inference engine (engine/torch) is optional: without LibTorch everything else
# builds and runs. AUTO builds it when Debian's libtorch-dev is installed; ON requires it.
set(GPUCAP_WITH_TORCH AUTO CACHE STRING "Build the LibTorch engine: AUTO, ON or OFF")
set_property(CACHE GPUCAP_WITH_TORCH PROPERTY STRINGS AUTO ON OFF)
set(GPUCAP_HAVE_TORCH OFF)
if(NOT GPUCAP_WITH_TORCH STREQUAL "OFF")
  if(GPUCAP_WITH_TORCH STREQUAL "ON")
    find_package(Torch REQUIRED)
  else()
    find_package(Torch QUIET)
  endif()
  # libjpeg-turbo decodes the engine's image folders.
  find_package(PkgConfig QUIET)
  if(PkgConfig_FOUND)
    pkg_check_modules(turbojpeg QUIET IMPORTED_TARGET libturbojpeg)
  endif()
  # OpenMP: LibTorch's intra-op threads, capped per thread by the trainer (engine/torch_trainer.cpp).
  find_package(OpenMP QUIET COMPONENTS CXX)
  if(Torch_FOUND AND turbojpeg_FOUND AND OpenMP_CXX_FOUND)
    set(GPUCAP_HAVE_TORCH ON)
  elseif(Torch_FOUND AND NOT OpenMP_CXX_FOUND)
    message(STATUS "gpucap: LibTorch found but not OpenMP (the compiler's -fopenmp): no LibTorch engine")
  elseif(Torch_FOUND)
    message(STATUS "gpucap: LibTorch found but not libjpeg-turbo (libturbojpeg0-dev): no LibTorch engine")
  endif()
  if(GPUCAP_WITH_TORCH STREQUAL "ON" AND NOT GPUCAP_HAVE_TORCH)
    message(FATAL_ERROR "GPUCAP_WITH_TORCH=ON needs libtorch-dev, libturbojpeg0-dev and OpenMP")
  endif()
endif()
message(STATUS "gpucap: LibTorch engine ${GPUCAP_HAVE_TORCH}")

# cpp-httplib (libcpp-httplib-dev): the BSO service and its client (bsoclient/) speak HTTP.
# Guarded: several modules need it, and the imported target exists only once.
if(NOT TARGET PkgConfig::cpphttplib)
  find_package(PkgConfig REQUIRED)
  pkg_check_modules(cpphttplib REQUIRED IMPORTED_TARGET cpp-httplib)
endif()

# The BSO service's stores (service/, `gpucap bso serve`): SQLite (libsqlite3-dev) for one
# server, PostgreSQL through libpqxx (libpqxx-dev) for several.
find_package(PkgConfig REQUIRED)
pkg_check_modules(sqlite3 REQUIRED IMPORTED_TARGET sqlite3)
pkg_check_modules(libpqxx REQUIRED IMPORTED_TARGET libpqxx)
