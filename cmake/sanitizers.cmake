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
# LLVM's linker, where installed (scripts/setup.sh installs lld): the instrumented executables carry
# hundreds of MB of debug info, and GNU ld took 57 s to link the gpucap binary where lld took 15 s.
find_program(GPUCAP_LLD ld.lld)
set(gpucap_sanitizer_linker)
if(GPUCAP_LLD AND (GPUCAP_SANITIZE OR GPUCAP_TSAN))
  set(gpucap_sanitizer_linker -fuse-ld=lld)
endif()
if(GPUCAP_SANITIZE)
  target_compile_options(gpucap_sanitizers INTERFACE
    -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all ${gpucap_debug_prefix_map})
  target_link_options(gpucap_sanitizers INTERFACE -fsanitize=address,undefined ${gpucap_sanitizer_linker})
  # Executables stay PIE, although as a PIE the instrumented -O0 gpucap binary carries 7.1 million
  # relative relocations that cost about 0.6 s of CPU at every start. Linked as non-PIE, its
  # globals lie in the first few MB of the address space, where ASan's recv() interceptor checks
  # [NULL, n) for the recv(fd, nullptr, n, MSG_TRUNC) that GuardedServer drops a body with (the
  # kernel writes nothing there) and reports a global-buffer-overflow that is not one.
endif()
if(GPUCAP_TSAN)
  target_compile_options(gpucap_sanitizers INTERFACE -fsanitize=thread -fno-omit-frame-pointer ${gpucap_debug_prefix_map})
  target_link_options(gpucap_sanitizers INTERFACE -fsanitize=thread ${gpucap_sanitizer_linker})
endif()
