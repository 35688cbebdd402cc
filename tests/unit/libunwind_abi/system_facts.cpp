#define UNW_LOCAL_ONLY
#include <libunwind.h>

#include "abi_facts.h"

#define FACTS_FUNCTION system_libunwind_facts
#include "facts.inc"
