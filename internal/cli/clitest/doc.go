// Package clitest holds a binary's command line to what package cli
// promises, through the run function its tests already call. Conform holds
// a binary built on cli.Command to the whole of it: --help and -h exit 0
// naming every variable and LOG_LEVEL, --version exits 0 printing the
// version line, completion writes the shell's script, none of them reads
// the environment, an unknown flag exits 2 with the usage on standard error
// and a bad LOG_LEVEL exits 2 with one line naming it. Check holds a tool
// that still answers through cli.Service.Answer to the first part.
package clitest
