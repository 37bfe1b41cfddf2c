package clitest

import (
	"bytes"
	"io"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/JorisJonkers-dev/delivery/internal/cli"
)

// Run runs a binary whole with these arguments, environment and outputs.
type Run func(args []string, getenv func(string) string, stdout, stderr io.Writer) int

// Check runs the binary named name through run with --help, -h, --version
// and a flag no binary has. The help must name every variable in vars.
func Check(t *testing.T, name string, run Run, vars []string) {
	t.Helper()
	unread := func(variable string) string {
		t.Errorf("%s read %s before it answered its command line", name, variable)
		return ""
	}
	for _, flag := range []string{"--help", "-h"} {
		var stdout, stderr bytes.Buffer
		if code := run([]string{flag}, unread, &stdout, &stderr); code != 0 {
			t.Errorf("%s %s: exit %d, stderr %s", name, flag, code, stderr.String())
		}
		if !strings.Contains(stdout.String(), "Usage:") {
			t.Errorf("%s %s printed no usage on stdout:\n%s", name, flag, stdout.String())
		}
		for _, v := range vars {
			if !strings.Contains(stdout.String(), v) {
				t.Errorf("%s %s does not name %s:\n%s", name, flag, v, stdout.String())
			}
		}
	}
	var stdout, stderr bytes.Buffer
	if code := run([]string{"--version"}, unread, &stdout, &stderr); code != 0 {
		t.Errorf("%s --version: exit %d, stderr %s", name, code, stderr.String())
	}
	if got, want := strings.TrimSpace(stdout.String()), cli.VersionLine(name); got != want {
		t.Errorf("%s --version printed %q, want %q", name, got, want)
	}
	stdout.Reset()
	stderr.Reset()
	if code := run([]string{"--no-such-flag"}, unread, &stdout, &stderr); code != 2 {
		t.Errorf("%s --no-such-flag: exit %d, want 2", name, code)
	}
	if !strings.Contains(stderr.String(), "no-such-flag") || !strings.Contains(stderr.String(), "Usage:") {
		t.Errorf("%s --no-such-flag: want the mistake and the usage on stderr, got %q", name, stderr.String())
	}
}

// Recorder is an environment that remembers which variables were read.
type Recorder struct {
	env  map[string]string
	mu   sync.Mutex
	read []string
}

// Record reads env and remembers what was read.
func Record(env map[string]string) *Recorder { return &Recorder{env: env} }

// Getenv is the Recorder as a binary's getenv.
func (r *Recorder) Getenv(name string) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !slices.Contains(r.read, name) {
		r.read = append(r.read, name)
	}
	return r.env[name]
}

// Named fails t for each variable read that is not in vars: one the binary
// reads but its help would not name.
func (r *Recorder) Named(t *testing.T, vars []string) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.read) == 0 {
		t.Error("nothing was read")
	}
	for _, name := range r.read {
		if !slices.Contains(vars, name) {
			t.Errorf("%s is read but not named in the help", name)
		}
	}
}
