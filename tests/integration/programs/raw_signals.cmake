# The probe of test_raw_signals.py: signal masks, handlers and bad pointers under the raw-call layer.
add_executable(raw_signals programs/raw_signals.c)
target_compile_options(raw_signals PRIVATE ${APPENDGUARD_WARNINGS} -O2)
