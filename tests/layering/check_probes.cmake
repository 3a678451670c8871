# cmake -DBUILD_DIR=<build> -DPROBES=<target|header|fail-or-ok;...> -P check_probes.cmake
# Builds each probe target of tests/layering (a one-line source compiled with a module's own include
# path) and checks that a wrong-way #include fails for the right reason, and that a right-way one
# builds (so the failures are not the probe's own).
cmake_minimum_required(VERSION 3.25)
foreach(probe IN LISTS PROBES)
  string(REPLACE "|" ";" parts "${probe}")
  list(GET parts 0 target)
  list(GET parts 1 header)
  list(GET parts 2 expect)
  execute_process(COMMAND "${CMAKE_COMMAND}" --build "${BUILD_DIR}" --target "${target}"
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
  string(REPLACE "." "[.]" header_re "${header}")
  if(expect STREQUAL "fail")
    if(rc EQUAL 0)
      message(SEND_ERROR "${target}: #include \"${header}\" built, but its module may not use that module")
    elseif(NOT out MATCHES "${header_re}[^\n]*(No such file|not found)")
      message(SEND_ERROR "${target} failed, but not for want of ${header}:\n${out}")
    else()
      message(STATUS "${target}: #include \"${header}\" is refused, as it should be")
    endif()
  elseif(NOT rc EQUAL 0)
    message(SEND_ERROR "${target}: #include \"${header}\" did not build, but its module may use it:\n${out}")
  else()
    message(STATUS "${target}: #include \"${header}\" builds, as it should")
  endif()
endforeach()
