// Command dynamic links libc through cgo, so a test has a binary that needs
// a dynamic loader.
package main

// #include <stdlib.h>
import "C"

func main() { C.abs(0) }
