// Package clitest holds a binary's command line to what package cli
// promises, through the run function its tests already call: --help and -h
// exit 0 naming every variable, --version exits 0 printing the version line,
// a flag the binary does not know exits 2 with the usage on standard error,
// and none of them reads the environment.
package clitest
