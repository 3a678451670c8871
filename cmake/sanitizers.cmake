# AddressSanitizer + UndefinedBehaviorSanitizer for the asan-ubsan preset.
add_library(gpucap_sanitizers INTERFACE)
if(GPUCAP_SANITIZE)
  target_compile_options(gpucap_sanitizers INTERFACE
    -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all)
  target_link_options(gpucap_sanitizers INTERFACE -fsanitize=address,undefined)
endif()
