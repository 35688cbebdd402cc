# Programs for test_robustness.py: calls before our constructor, after exit, in signal handlers.
add_library(early_lib SHARED programs/early_lib.c)
target_compile_options(early_lib PRIVATE ${APPENDGUARD_WARNINGS})
add_executable(early_main programs/early_main.c)
target_link_libraries(early_main PRIVATE early_lib)
target_compile_options(early_main PRIVATE ${APPENDGUARD_WARNINGS})
add_executable(late_writes programs/late_writes.cpp)
target_compile_options(late_writes PRIVATE ${APPENDGUARD_WARNINGS} -O2)
