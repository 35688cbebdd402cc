# The probe of test_descriptors.py: descriptors and file identity (issue 24).
add_executable(descriptors programs/descriptors.c)
target_compile_options(descriptors PRIVATE ${APPENDGUARD_WARNINGS} -O2)
