# Code that ends up in libappendguard.so: no exceptions, no RTTI (they pull in libstdc++'s unwinder and
# locale machinery, hence GLIBC_2.3x symbol versions and most of the library's size), fmt without
# locales and floating point, and libc names pinned to their GLIBC_2.2.5 versions (glibc_floor.h).
set(APPENDGUARD_FLOOR_HEADER ${PROJECT_SOURCE_DIR}/src/compat/glibc_floor.h)

function(appendguard_preload_code target)
  target_compile_options(${target} PRIVATE -fno-exceptions -fno-rtti "SHELL:-include ${APPENDGUARD_FLOOR_HEADER}")
  set_target_properties(${target} PROPERTIES CXX_VISIBILITY_PRESET hidden VISIBILITY_INLINES_HIDDEN ON)
endfunction()

# fmt's configuration must be the same in every file that includes it (one definition rule), so the
# fmt-using target carries it in its interface: see src/compat/fmt_config.h.
set(APPENDGUARD_FMT_CONFIG ${PROJECT_SOURCE_DIR}/src/compat/fmt_config.h)
