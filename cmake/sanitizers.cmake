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
  # Executables are linked as non-PIE: as a PIE the instrumented gpucap binary carries 7.1 million
  # relative relocations (UBSan's and ASan's static data, 194 MB of .data), and the dynamic loader
  # writing them made every start take 1.35 s of wall time instead of 0.55 s; the CLI tests start
  # gpucap over and over (Cli.RunRejectsBadInput alone: 26 s as PIEs, 12 s non-PIE). Packing them
  # as RELR does not help: the pages are written all the same. The objects stay as compiled
  # (-fPIE, Debian's default), so ccache's entries still hold.
  target_link_options(gpucap_sanitizers INTERFACE -fsanitize=address,undefined ${gpucap_sanitizer_linker}
    $<$<STREQUAL:$<TARGET_PROPERTY:TYPE>,EXECUTABLE>:-no-pie>)
endif()
# The modules where the tests spend their time in arithmetic (the twin's sweeps, the Ceres fits of
# predict/, calibrate/ and tune/'s Gaussian process, the benchmark matrices) are compiled at -O1
# under ASan+UBSan, as the sanitizers' own documentation advises: at -O0 their tests ran 10-25x
# slower than in the Release build, and the stage did not fit in CI. Every check stays in. The
# other modules stay at -O0, where no access is optimised away.
set(GPUCAP_SANITIZER_O1_MODULES sim sched predict calibrate tune bench control)
if(GPUCAP_TSAN)
  target_compile_options(gpucap_sanitizers INTERFACE -fsanitize=thread -fno-omit-frame-pointer ${gpucap_debug_prefix_map})
  target_link_options(gpucap_sanitizers INTERFACE -fsanitize=thread ${gpucap_sanitizer_linker})
endif()
