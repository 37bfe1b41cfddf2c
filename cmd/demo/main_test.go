package main

import (
	"context"
	"io"
	"strings"
	"testing"

	"github.com/JorisJonkers-dev/delivery/internal/cli/clitest"
	"github.com/JorisJonkers-dev/delivery/internal/demo"
)

func TestRun(t *testing.T) {
	cases := []struct {
		name     string
		args     []string
		playErr  error
		code     int
		once     bool
		kwok     bool
		played   bool
		errorOut string
	}{
		{"the story, left running", nil, nil, 0, false, false, true, ""},
		{"the story once", []string{"--once"}, nil, 0, true, false, true, ""},
		{"the story on kwok's cluster", []string{"--once", "--kwok"}, nil, 0, true, true, true, ""},
		{"a step that did not answer as expected", []string{"--once"}, demo.ErrUnexpected, 1, true, false, true, "did not answer"},
		{"an unknown flag", []string{"--twice"}, nil, 2, false, false, false, "twice"},
		{"an argument", []string{"now"}, nil, 2, false, false, false, "no arguments"},
		{"a bad log level", nil, nil, 2, false, false, false, "LOG_LEVEL"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var got *demo.Options
			play := func(_ context.Context, o demo.Options) error { got = &o; return c.playErr }
			var out, errOut strings.Builder
			getenv := func(string) string { return "" }
			if c.name == "a bad log level" {
				getenv = func(name string) string { return map[string]string{"LOG_LEVEL": "loud"}[name] }
			}
			code := run(context.Background(), c.args, getenv, &out, &errOut, play)
			if code != c.code || (got != nil) != c.played || (got != nil && (got.Once != c.once || got.Kwok != c.kwok)) || !strings.Contains(errOut.String(), c.errorOut) {
				t.Fatalf("run(%q) = %d, played %v, stderr %q", c.args, code, got, errOut.String())
			}
			if got != nil && got.Out != &out {
				t.Fatal("the transcript does not go to stdout")
			}
		})
	}
}

func TestCommandLine(t *testing.T) {
	clitest.Conform(t, clitest.Binary{Name: "demo", Variables: []string{"--once", "--kwok", "KUBEBUILDER_ASSETS", "DELIVERY_CACHE"},
		Run: func(args []string, getenv func(string) string, stdout, stderr io.Writer) int {
			return run(context.Background(), args, getenv, stdout, stderr, func(context.Context, demo.Options) error {
				t.Error("the demo played")
				return nil
			})
		}})
}
