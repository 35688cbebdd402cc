# The program of test_report_stacks.py: no tail calls, so that each step is its own frame.
add_executable(report_sites ${CMAKE_CURRENT_LIST_DIR}/report_sites.c)
target_compile_options(report_sites PRIVATE ${APPENDGUARD_WARNINGS} -O2 -fno-omit-frame-pointer -fno-optimize-sibling-calls)
target_link_libraries(report_sites PRIVATE Threads::Threads)
