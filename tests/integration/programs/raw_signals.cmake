# The probe of test_raw_signals.py: signal masks, handlers and bad pointers under the raw-call layer.
add_executable(raw_signals programs/raw_signals.c)
target_compile_options(raw_signals PRIVATE ${APPENDGUARD_WARNINGS} -O2)
# The probe of test_alt_stack.py: the stack a handler on a 4 KiB alternate stack uses per interposed call.
add_executable(alt_stack_use programs/alt_stack_use.c)
target_compile_options(alt_stack_use PRIVATE ${APPENDGUARD_WARNINGS} -O2)
