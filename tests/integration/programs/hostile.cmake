# The probe of test_hostile_conditions.py: a guarded file under hostile process conditions (third round).
add_executable(hostile programs/hostile.c)
target_compile_options(hostile PRIVATE ${APPENDGUARD_WARNINGS} -O2)
target_link_libraries(hostile PRIVATE Threads::Threads ${CMAKE_DL_LIBS})
