# The program of test_held_numbers.py: what a program can do with a number it closed while a held write
# session keeps the descriptor open.
add_executable(held_numbers programs/held_numbers.c)
target_compile_options(held_numbers PRIVATE ${APPENDGUARD_WARNINGS} -O2)
target_link_libraries(held_numbers PRIVATE ${CMAKE_DL_LIBS})
add_library(slow_thread_close SHARED programs/slow_thread_close.c)
target_compile_options(slow_thread_close PRIVATE ${APPENDGUARD_WARNINGS})
target_link_libraries(slow_thread_close PRIVATE ${CMAKE_DL_LIBS})
