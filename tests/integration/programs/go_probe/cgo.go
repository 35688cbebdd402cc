//go:build cgo

// Links the probe with cgo (a dynamically linked Go program) when built with CGO_ENABLED=1.
package main

// #include <stdlib.h>
import "C"

var _ = C.free
