// Package cli is the command line every binary of this module shares, on
// cobra: a Command names the variables it reads, and Env.Execute runs it.
// --help prints its summary, usage and variables (LOG_LEVEL among them),
// --version the module version and commit it was built from, and
// "completion bash|zsh|fish" the shell's script; none of them reads the
// environment. A run logs to standard error, text on a terminal and JSON
// lines elsewhere, at LOG_LEVEL. It exits 0, 1 for a failure at run time,
// and 2 for a mistake on the command line (printed with the usage) or a bad
// setting (one line, "bad configuration", its error naming the variable).
// Main is every command's main: the first SIGTERM or SIGINT ends the run's
// context, a second one kills. Service and its Answer remain for a tool
// that reads no more than --help and --version.
package cli
