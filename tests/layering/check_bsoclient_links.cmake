# cmake -DLINKS=<bsoclient_links.txt> -DPROGRAM=<bsoclient_link_probe> -P check_bsoclient_links.cmake
# What a program linking only gpucap_bsoclient links: gpucap's core, bso, device, monitor and
# bsoclient modules, and the Debian libraries those use (fmt, spdlog, nlohmann-json, threads, dl,
# cpp-httplib). Anything else - the twin, the service's SQLite and libpqxx, Ceres, dlib, OpenSSL,
# LibTorch - is an error: the client is what a training program links.
cmake_minimum_required(VERSION 3.25)
set(allowed_modules core bso device monitor bsoclient)
set(allowed_libraries "^(fmt::fmt|fmt::fmt-header-only|spdlog::spdlog|spdlog::spdlog_header_only|nlohmann_json::nlohmann_json|Threads::Threads|PkgConfig::cpphttplib|dl|-l?pthread|-pthread|gpucap_warnings|gpucap_sanitizers)$|/lib(fmt|spdlog|cpp-httplib|pthread|dl)[.]")
# The shared libraries the program needs (ELF DT_NEEDED): those, the C and C++ runtimes, and the
# sanitizers' runtimes in a sanitizer build.
set(allowed_needed "^(libfmt|libspdlog|libcpp-httplib|libstdc[+][+]|libm|libgcc_s|libc|libpthread|libdl|libasan|libubsan|libtsan|ld-linux[-a-z0-9_]*)[.]so")

file(STRINGS "${LINKS}" links)
if(NOT links)
  message(FATAL_ERROR "${LINKS} lists nothing")
endif()
set(found_modules)
foreach(link IN LISTS links)
  if(link MATCHES "^gpucap_(warnings|sanitizers)$")  # compile options, nothing linked
    continue()
  endif()
  if(link MATCHES "^gpucap_(.+)$")
    set(module "${CMAKE_MATCH_1}")
    list(APPEND found_modules "${module}")
    if(NOT module IN_LIST allowed_modules)
      message(SEND_ERROR "gpucap_bsoclient links ${link}: the client may link only gpucap_{${allowed_modules}}")
    endif()
  elseif(NOT link MATCHES "${allowed_libraries}")
    message(SEND_ERROR "gpucap_bsoclient links ${link}, which is none of its modules' Debian libraries")
  endif()
endforeach()
# The check itself: it must have seen the client's own modules.
foreach(module IN ITEMS bsoclient core)
  if(NOT module IN_LIST found_modules)
    message(SEND_ERROR "${LINKS} does not list gpucap_${module}: the link closure was not computed")
  endif()
endforeach()

find_program(READELF readelf)
if(READELF)
  execute_process(COMMAND "${READELF}" -d "${PROGRAM}" RESULT_VARIABLE rc OUTPUT_VARIABLE dynamic ERROR_VARIABLE dynamic)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "readelf -d ${PROGRAM}: ${dynamic}")
  endif()
  string(REGEX MATCHALL "\\(NEEDED\\)[^\n]*\\[[^]\n]*\\]" needed "${dynamic}")
  if(NOT needed)
    message(SEND_ERROR "readelf -d ${PROGRAM} lists no NEEDED library:\n${dynamic}")
  endif()
  set(libraries)
  foreach(entry IN LISTS needed)
    string(REGEX REPLACE ".*\\[(.*)\\]" "\\1" library "${entry}")
    list(APPEND libraries "${library}")
    if(NOT library MATCHES "${allowed_needed}")
      message(SEND_ERROR "a program linking only gpucap_bsoclient needs ${library}")
    endif()
  endforeach()
endif()
message(STATUS "gpucap_bsoclient links gpucap_{${found_modules}}; the program needs ${libraries}")
