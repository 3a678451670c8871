# The sanitizer presets: AddressSanitizer + UndefinedBehaviorSanitizer (asan-ubsan,
# GPUCAP_SANITIZE) and ThreadSanitizer (tsan, GPUCAP_TSAN). Every gpucap library links this target
# publicly, so the tests and the gpucap binary are built with the same flags. A finding ends the
# process with an error (no recovery), so a test with one fails.
add_library(gpucap_sanitizers INTERFACE)
if(GPUCAP_SANITIZE AND GPUCAP_TSAN)
  message(FATAL_ERROR "GPUCAP_SANITIZE (ASan+UBSan) and GPUCAP_TSAN cannot be combined: use one preset each")
endif()
# The sanitizer builds carry debug info (for the reports' stack traces). With it, ccache hashes the
# directory a file is compiled in, unless the debug info is relocated to a common prefix: so that a
# fresh clone (CI) reuses what an earlier clone compiled, the checkout's path is mapped to ".".
set(gpucap_debug_prefix_map "-fdebug-prefix-map=${PROJECT_SOURCE_DIR}=.")
if(GPUCAP_SANITIZE)
  target_compile_options(gpucap_sanitizers INTERFACE
    -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all ${gpucap_debug_prefix_map})
  target_link_options(gpucap_sanitizers INTERFACE -fsanitize=address,undefined)
  # Executables are linked as non-PIE. As a PIE, the instrumented -O0 gpucap binary carries 7.1
  # million relative relocations that the dynamic loader applies at every start: `gpucap --help`
  # took 1.3 s of CPU on the development VM, 0.65 s as non-PIE, and the CLI tests start it
  # hundreds of times. The objects stay position-independent, so shared libraries still link.
  target_link_options(gpucap_sanitizers INTERFACE $<$<STREQUAL:$<TARGET_PROPERTY:TYPE>,EXECUTABLE>:-no-pie>)
endif()
if(GPUCAP_TSAN)
  target_compile_options(gpucap_sanitizers INTERFACE -fsanitize=thread -fno-omit-frame-pointer ${gpucap_debug_prefix_map})
  target_link_options(gpucap_sanitizers INTERFACE -fsanitize=thread)
endif()
