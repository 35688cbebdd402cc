# The probe of test_descriptors.py: descriptors and file identity (issue 24).
add_executable(descriptors programs/descriptors.c)
target_compile_options(descriptors PRIVATE ${APPENDGUARD_WARNINGS} -O2)
add_library(count_calls SHARED programs/count_calls.c)
target_compile_options(count_calls PRIVATE ${APPENDGUARD_WARNINGS})
target_link_libraries(count_calls PRIVATE ${CMAKE_DL_LIBS})
