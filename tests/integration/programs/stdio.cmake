# Programs for test_stdio.py: C streams (plain and fortified, both -O2) and C++ std::fstream.
foreach(variant stdio_probe stdio_probe_fortified)
  add_executable(${variant} ${CMAKE_CURRENT_LIST_DIR}/stdio_probe.c)
  target_compile_options(${variant} PRIVATE ${APPENDGUARD_WARNINGS} -O2)
endforeach()
target_compile_definitions(stdio_probe_fortified PRIVATE _FORTIFY_SOURCE=2)
add_executable(stream_probe ${CMAKE_CURRENT_LIST_DIR}/stream_probe.cpp)
target_compile_options(stream_probe PRIVATE ${APPENDGUARD_WARNINGS} -O2)
target_compile_features(stream_probe PRIVATE cxx_std_20)
