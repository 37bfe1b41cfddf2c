// Package githubapp reaches GitHub as a GitHub App installation: the App JWT
// and the installation tokens (refreshed before they expire) come from
// ghinstallation, every REST call from go-github. It reads and writes one file
// of one repository so that a concurrent change makes a write fail, never win.
// Every GET is repeated as a conditional request, so reading what did not
// change costs no rate-limit units.
package githubapp
