# The sanitizer presets: AddressSanitizer + UndefinedBehaviorSanitizer (asan-ubsan,
# GPUCAP_SANITIZE) and ThreadSanitizer (tsan, GPUCAP_TSAN). Every gpucap library links this target
# publicly, so the tests and the gpucap binary are built with the same flags. A finding ends the
# process with an error (no recovery), so a test with one fails.
add_library(gpucap_sanitizers INTERFACE)
if(GPUCAP_SANITIZE AND GPUCAP_TSAN)
  message(FATAL_ERROR "GPUCAP_SANITIZE (ASan+UBSan) and GPUCAP_TSAN cannot be combined: use one preset each")
endif()
if(GPUCAP_SANITIZE)
  target_compile_options(gpucap_sanitizers INTERFACE
    -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all)
  target_link_options(gpucap_sanitizers INTERFACE -fsanitize=address,undefined)
endif()
if(GPUCAP_TSAN)
  target_compile_options(gpucap_sanitizers INTERFACE -fsanitize=thread -fno-omit-frame-pointer)
  target_link_options(gpucap_sanitizers INTERFACE -fsanitize=thread)
endif()
