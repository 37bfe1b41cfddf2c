package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/JorisJonkers-dev/delivery/internal/settings"
)

// tool is a binary with a flag, a subcommand of its own and one written
// with cobra itself, each ending as its arguments ask.
func tool(ran *[]string) Command {
	var loud bool
	end := func(ctx context.Context, env Env, name string) error {
		*ran = append(*ran, name)
		env.Log.Debug("debugging")
		switch strings.Join(env.Args, " ") {
		case "setting":
			return BadSetting(errors.New("INTERVAL: \"often\" is not a positive duration"))
		case "call":
			return Failed("call failed", errors.New("refused"), "call", "login")
		case "plain":
			return errors.New("lost")
		}
		if loud {
			env.Log.Info("loud")
		}
		return nil
	}
	return Command{
		Service: Service{Name: "tool", Summary: "tool does what it is told.", Variables: []settings.Variable{{Name: "INTERVAL", Default: "10m", Meaning: "how often"}}},
		Use:     "[--loud] [setting|call|plain]",
		Args:    cobra.MaximumNArgs(1),
		Flags:   func(c *cobra.Command) { c.Flags().BoolVar(&loud, "loud", false, "say more") },
		Run:     func(ctx context.Context, env Env) error { return end(ctx, env, "tool") },
		Subcommands: []Command{{Service: Service{Name: "sweep", Summary: "sweep sweeps once."},
			Run: func(ctx context.Context, env Env) error { return end(ctx, env, "sweep") }}},
	}
}

func TestExecute(t *testing.T) {
	for _, c := range []struct {
		name           string
		args           []string
		env            map[string]string
		code           int
		ran            string
		stdout, stderr string
	}{
		{"a run", nil, nil, 0, "tool", "", ""},
		{"a flag", []string{"--loud"}, nil, 0, "tool", "", `"msg":"loud"`},
		{"the log level", []string{"--loud"}, map[string]string{"LOG_LEVEL": "warn"}, 0, "tool", "", ""},
		{"debug", nil, map[string]string{"LOG_LEVEL": "DEBUG"}, 0, "tool", "", `"msg":"debugging"`},
		{"a subcommand", []string{"sweep"}, nil, 0, "sweep", "", ""},
		{"help", []string{"--help"}, nil, 0, "", "INTERVAL   10m   how often\n  LOG_LEVEL  info", ""},
		{"a subcommand's help", []string{"sweep", "-h"}, nil, 0, "", "sweep sweeps once.", ""},
		{"version", []string{"--version"}, nil, 0, "", "tool " + Version(), ""},
		{"completion", []string{"completion", "fish"}, nil, 0, "", "complete -c tool", ""},
		{"an unknown flag", []string{"--quiet"}, nil, 2, "", "", "tool: unknown flag: --quiet\n\nUsage:"},
		{"an argument too many", []string{"sweep", "now"}, nil, 2, "", "", `tool sweep: takes no arguments, got ["now"]`},
		{"a bad log level", nil, map[string]string{"LOG_LEVEL": "loud"}, 2, "", "", `"msg":"bad configuration","error":"LOG_LEVEL: \"loud\" is not debug, info, warn or error"`},
		{"a bad setting", []string{"setting"}, nil, 2, "tool", "", `"msg":"bad configuration","error":"INTERVAL: `},
		{"a failure", []string{"call"}, nil, 1, "tool", "", `"msg":"call failed","call":"login","error":"refused"`},
		{"a plain error", []string{"plain"}, nil, 1, "tool", "", `"msg":"failed","error":"lost"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			var ran []string
			var stdout, stderr bytes.Buffer
			env := NewEnv(func(k string) string { return c.env[k] }, &stdout, &stderr)
			code := env.Execute(context.Background(), tool(&ran), c.args)
			if code != c.code || strings.Join(ran, " ") != c.ran {
				t.Errorf("exit %d ran %q, want %d %q; stderr %s", code, ran, c.code, c.ran, stderr.String())
			}
			if !strings.Contains(stdout.String(), c.stdout) || !strings.Contains(stderr.String(), c.stderr) {
				t.Errorf("stdout %q\nstderr %q", stdout.String(), stderr.String())
			}
			if c.stderr == "" && stderr.Len() > 0 || c.code != 0 && stdout.Len() > 0 {
				t.Errorf("stdout %q\nstderr %q", stdout.String(), stderr.String())
			}
			if c.code != 0 && c.code != 2 || strings.HasPrefix(stderr.String(), "{") {
				for line := range strings.Lines(stderr.String()) {
					if !json.Valid([]byte(line)) {
						t.Errorf("a log line that is not JSON: %q", line)
					}
				}
			}
		})
	}
}

// TestAdoptedCommands runs cobra commands built elsewhere under the same
// log level and exit policy, with their help naming their variables.
func TestAdoptedCommands(t *testing.T) {
	ran := false
	root := func() Command {
		return Command{Service: Service{Name: "mesh", Summary: "mesh moves modules."},
			Commands: []*cobra.Command{{Use: "agent", Args: cobra.NoArgs, RunE: func(*cobra.Command, []string) error { ran = true; return Exit(1) }}},
			VariablesOf: func(name string) []settings.Variable {
				if name == "agent" {
					return []settings.Variable{{Name: "NODE_NAME", Default: settings.Required, Meaning: "the node"}}
				}
				return nil
			}}
	}
	for _, c := range []struct {
		args   []string
		level  string
		code   int
		ran    bool
		stdout string
		stderr string
	}{
		{[]string{"agent"}, "", 1, true, "", ""},
		{[]string{"agent"}, "nonsense", 2, false, "", "LOG_LEVEL"},
		{[]string{"agent", "--help"}, "", 0, false, "NODE_NAME", ""},
		{[]string{"help", "agent"}, "", 0, false, "NODE_NAME", ""},
		{nil, "", 2, false, "", "mesh: a command is required: agent\n\nUsage:"},
		{[]string{"deploy"}, "", 2, false, "", `unknown command "deploy" for "mesh"`},
	} {
		ran = false
		var stdout, stderr bytes.Buffer
		code := NewEnv(func(string) string { return c.level }, &stdout, &stderr).Execute(context.Background(), root(), c.args)
		if code != c.code || ran != c.ran || !strings.Contains(stdout.String(), c.stdout) || !strings.Contains(stderr.String(), c.stderr) {
			t.Errorf("%q: exit %d ran %v, stdout %q stderr %q", c.args, code, ran, stdout.String(), stderr.String())
		}
	}
}

func TestParseLevel(t *testing.T) {
	for value, ok := range map[string]bool{"": true, "debug": true, "Info": true, "warn": true, "error": true, "trace": false, "2": false} {
		if _, err := ParseLevel(value); (err == nil) != ok || err != nil && !strings.HasPrefix(err.Error(), "LOG_LEVEL: ") {
			t.Errorf("ParseLevel(%q): %v", value, err)
		}
	}
}
