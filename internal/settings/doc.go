// Package settings reads a service's environment variables. The first missing
// or malformed variable is kept, so a binary stops at start with one line that
// names it.
package settings
