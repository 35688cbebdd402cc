# The probe of test_raw_syscalls.py: system calls made with this program's own `syscall` instructions.
add_executable(raw_syscalls programs/raw_syscalls.c)
target_compile_options(raw_syscalls PRIVATE ${APPENDGUARD_WARNINGS} -O2)
target_link_libraries(raw_syscalls PRIVATE Threads::Threads)
