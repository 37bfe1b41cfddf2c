// Package cli is what every binary of this module answers on its command
// line before it reads its environment: --help, which names every variable
// the binary reads with its default, and --version, the module version and
// commit it was built from. A mistake on the command line exits 2 with the
// usage on standard error. A service configured by its environment alone
// describes itself as a Service; a binary with flags of its own (backup,
// demo) prints its variables and version through the same functions.
package cli
