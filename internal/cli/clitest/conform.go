package clitest

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/JorisJonkers-dev/delivery/internal/cli"
)

// Binary is one binary built on cli.Command, for Conform.
type Binary struct {
	Name string
	Run  Run
	// Variables are what its --help must name; LOG_LEVEL is always added.
	Variables []string
	// Start are the arguments that start its work ("files" for backup),
	// nil for a binary its environment alone configures.
	Start []string
}

// Conform holds b to the command line every binary shares: --help and -h
// name every variable, --version prints the version line, completion
// writes the shell's script, and none of them reads the environment; an
// unknown flag exits 2 with the usage, and a bad LOG_LEVEL exits 2 with one
// log line naming it before anything else is read.
func Conform(t *testing.T, b Binary) {
	t.Helper()
	badLevel := func(name string) string {
		if name == cli.LogLevel.Name {
			return "verbose"
		}
		return ""
	}
	for _, c := range []struct {
		name   string
		args   []string
		getenv func(string) string // nil: nothing may be read
		code   int
		check  func(t *testing.T, stdout, stderr string)
	}{
		{"help", []string{"--help"}, nil, 0, b.names},
		{"short help", []string{"-h"}, nil, 0, b.names},
		{"version", []string{"--version"}, nil, 0, func(t *testing.T, stdout, _ string) {
			if got, want := strings.TrimSpace(stdout), cli.VersionLine(b.Name); got != want {
				t.Errorf("printed %q, want %q", got, want)
			}
		}},
		{"an unknown flag", []string{"--no-such-flag"}, nil, 2, func(t *testing.T, stdout, stderr string) {
			if stdout != "" || !strings.Contains(stderr, "no-such-flag") || !strings.Contains(stderr, "Usage:") {
				t.Errorf("want the mistake and the usage on stderr alone, got stdout %q stderr %q", stdout, stderr)
			}
		}},
		{"a bad setting", b.Start, badLevel, 2, func(t *testing.T, _, stderr string) {
			var line struct{ Level, Msg, Error string }
			if strings.Count(stderr, "\n") != 1 || json.Unmarshal([]byte(stderr), &line) != nil ||
				line.Level != "ERROR" || line.Msg != cli.BadSettingMsg || !strings.HasPrefix(line.Error, cli.LogLevel.Name+": ") {
				t.Errorf("want one JSON line %q naming %s, got %q", cli.BadSettingMsg, cli.LogLevel.Name, stderr)
			}
		}},
		{"bash completion", []string{"completion", "bash"}, nil, 0, b.completes},
		{"zsh completion", []string{"completion", "zsh"}, nil, 0, b.completes},
		{"fish completion", []string{"completion", "fish"}, nil, 0, b.completes},
	} {
		t.Run(c.name, func(t *testing.T) {
			getenv := c.getenv
			if getenv == nil {
				getenv = func(name string) string {
					t.Errorf("%s read %s before it answered its command line", b.Name, name)
					return ""
				}
			}
			var stdout, stderr bytes.Buffer
			if code := b.Run(c.args, getenv, &stdout, &stderr); code != c.code {
				t.Errorf("%s %q: exit %d, want %d; stderr %s", b.Name, c.args, code, c.code, stderr.String())
			}
			c.check(t, stdout.String(), stderr.String())
		})
	}
}

func (b Binary) names(t *testing.T, stdout, _ string) {
	t.Helper()
	if !strings.Contains(stdout, "Usage:") {
		t.Errorf("printed no usage on stdout:\n%s", stdout)
	}
	for _, v := range append([]string{cli.LogLevel.Name}, b.Variables...) {
		if !strings.Contains(stdout, v) {
			t.Errorf("does not name %s:\n%s", v, stdout)
		}
	}
}

func (b Binary) completes(t *testing.T, stdout, _ string) {
	t.Helper()
	if !strings.Contains(stdout, b.Name) {
		t.Errorf("the script does not complete %s:\n%.200s", b.Name, stdout)
	}
}
