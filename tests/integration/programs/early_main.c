#include <stdio.h>

extern long early_append_result;
extern long early_backward_result;

int main(void) {
  printf("early_append=%ld\nearly_backward=%ld\n", early_append_result, early_backward_result);
  return 0;
}
