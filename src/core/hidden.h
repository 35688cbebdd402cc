// Globals that the files of the preload library share. -fvisibility=hidden hides their definitions, but a
// declaration seen in another file is still taken to be preemptible, so every access from there first
// loads the address from the GOT: one instruction more on the hooks' paths. Declared hidden, they are
// reached relative to the instruction pointer.
#pragma once

#define APPENDGUARD_HIDDEN __attribute__((visibility("hidden")))
