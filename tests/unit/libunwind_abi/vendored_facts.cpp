#define UNW_LOCAL_ONLY
#include "compat/libunwind/libunwind.h"

#include "abi_facts.h"

#define FACTS_FUNCTION vendored_libunwind_facts
#include "facts.inc"
