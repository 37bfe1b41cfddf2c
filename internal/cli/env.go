package cli

import (
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/JorisJonkers-dev/delivery/internal/settings"
)

// LogLevel is the variable every binary reads its log level from.
var LogLevel = settings.Variable{Name: "LOG_LEVEL", Default: "info", Meaning: "the least severe log lines written: debug, info, warn or error"}

// Env is what a command runs with: its environment, its clock, its outputs,
// its log and, once its command line is read, its positional arguments.
type Env struct {
	Getenv         func(string) string
	Now            func() time.Time
	Stdout, Stderr io.Writer
	// Log writes to Stderr: text lines where Stderr is a terminal a person
	// reads, JSON lines elsewhere (in a pod), at LOG_LEVEL's level once the
	// command line is read.
	Log   *slog.Logger
	Args  []string
	level *slog.LevelVar
}

// NewEnv is the Env of one run, on the wall clock; a test that runs a
// command whole sets Now to its own. Its Log exists before LOG_LEVEL is
// read, so subcommands written with cobra itself can be handed it when they
// are built.
func NewEnv(getenv func(string) string, stdout, stderr io.Writer) Env {
	level := new(slog.LevelVar)
	return Env{Getenv: getenv, Now: time.Now, Stdout: stdout, Stderr: stderr, Log: NewLogger(stderr, level), level: level}
}

// NewLogger writes to w at level: text where w is a terminal, JSON lines
// elsewhere.
func NewLogger(w io.Writer, level slog.Leveler) *slog.Logger {
	opts := &slog.HandlerOptions{Level: level}
	if IsTerminal(w) {
		return slog.New(slog.NewTextHandler(w, opts))
	}
	return slog.New(slog.NewJSONHandler(w, opts))
}

// ParseLevel reads a LOG_LEVEL value; empty is info.
func ParseLevel(value string) (slog.Level, error) {
	switch strings.ToLower(strings.TrimSpace(value)) {
	case "debug":
		return slog.LevelDebug, nil
	case "", "info":
		return slog.LevelInfo, nil
	case "warn", "warning":
		return slog.LevelWarn, nil
	case "error":
		return slog.LevelError, nil
	}
	return 0, fmt.Errorf("%s: %q is not debug, info, warn or error", LogLevel.Name, value)
}

// Level is the log's level, LOG_LEVEL's once the command line is read, for
// a log a command keeps of its own: one that promises JSON lines even on a
// terminal.
func (env Env) Level() slog.Leveler {
	if env.level == nil {
		return slog.LevelInfo
	}
	return env.level
}

// readLevel sets the log's level from LOG_LEVEL: the first variable a
// command reads, after its command line.
func (env Env) readLevel() error {
	level, err := ParseLevel(env.Getenv(LogLevel.Name))
	if err != nil {
		return BadSetting(err)
	}
	if env.level != nil {
		env.level.Set(level)
	}
	return nil
}
