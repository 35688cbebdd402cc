// A statically linked program: LD_PRELOAD cannot reach it (`appendguard doctor` must say so).
int main(void) {
  return 0;
}
