package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/JorisJonkers-dev/delivery/internal/settings"
)

// Command is one binary, or one of its subcommands, as every binary of the
// module is built: --help names its variables (LOG_LEVEL among them),
// --version and completion come with the root, and Run starts only once the
// command line is read, so none of them reads the environment.
type Command struct {
	Service        // its name, what --help says of it, the variables it reads
	Use     string // what its usage line shows after its name: "[--once] [--kwok]"
	Short   string // the line its parent's help lists it by; the summary's first line where empty
	// Args checks its positional arguments; nil, it takes none.
	Args cobra.PositionalArgs
	// Flags adds its flags, bound to variables Run reads.
	Flags func(c *cobra.Command)
	// Run does the command's work. An error from BadSetting or Failed says
	// how the run ends; any other error ends it as a failure (1).
	Run func(ctx context.Context, env Env) error
	// Subcommands are its subcommands, built as it is.
	Subcommands []Command
	// Commands are subcommands written with cobra itself: they run under the
	// same log level and exit policy, and their help names what VariablesOf
	// gives for their name. An error of theirs that is neither an *Error nor
	// an ExitCoder is taken as a mistake on the command line, as cobra's own.
	Commands    []*cobra.Command
	VariablesOf func(command string) []settings.Variable
	Hidden      bool
}

// Execute runs root with args in env and answers the exit code: 0, 1 for a
// failure at run time, 2 for a mistake on the command line or a bad setting.
// A mistake is printed with the usage on stderr; anything else that ends a
// run is one log line, the same for the same cause in every binary.
func (env Env) Execute(ctx context.Context, root Command, args []string) int {
	c := root.Cobra(env)
	c.SetOut(env.Stdout)
	c.SetErr(env.Stderr)
	// A nil slice would make cobra read the process's own arguments.
	c.SetArgs(append([]string{}, args...))
	failed, err := c.ExecuteContextC(ctx)
	if err == nil {
		return ExitOK
	}
	if coded, ok := errors.AsType[ExitCoder](err); ok {
		return coded.ExitCode()
	}
	if e, ok := errors.AsType[*Error](err); ok {
		env.Log.Log(ctx, slog.LevelError, e.Msg, append(slices.Clip(e.Attrs), slog.String("error", e.Err.Error()))...)
		return e.Code
	}
	fmt.Fprintf(env.Stderr, "%s: %v\n\n%s", failed.CommandPath(), err, failed.UsageString())
	return ExitUsage
}

// Cobra builds c as a cobra command that runs in env.
func (c Command) Cobra(env Env) *cobra.Command {
	helped := map[*cobra.Command][]settings.Variable{}
	root := c.build(env, helped)
	root.Version = Version()
	root.SetVersionTemplate(VersionLine(c.Name) + "\n")
	// Declared before cobra declares its own, so -v stays free.
	root.Flags().Bool("version", false, "print the version and exit")
	root.SilenceErrors, root.SilenceUsage = true, true
	help := root.HelpFunc()
	root.SetHelpFunc(func(cmd *cobra.Command, args []string) {
		help(cmd, args)
		vars, ours := helped[cmd]
		if !ours {
			return // completion's and help's own commands read nothing
		}
		fmt.Fprintln(cmd.OutOrStdout(), "\nEnvironment:")
		WriteVariables(cmd.OutOrStdout(), slices.Concat(vars, []settings.Variable{LogLevel}))
	})
	return root
}

func (c Command) build(env Env, helped map[*cobra.Command][]settings.Variable) *cobra.Command {
	cmd := &cobra.Command{
		Use:    strings.TrimSpace(c.Name + " " + c.Use),
		Short:  c.Short,
		Long:   c.Summary,
		Args:   c.Args,
		Hidden: c.Hidden,
		// A usage line of its own names its flags already.
		DisableFlagsInUseLine: c.Use != "",
	}
	if cmd.Short == "" {
		cmd.Short, _, _ = strings.Cut(c.Summary, "\n")
	}
	if cmd.Args == nil {
		cmd.Args = NoArgs
	}
	if c.Flags != nil {
		c.Flags(cmd)
	}
	helped[cmd] = c.Variables
	switch {
	case c.Run != nil:
		run := c.Run
		cmd.RunE = func(cmd *cobra.Command, args []string) error {
			if err := env.readLevel(); err != nil {
				return err
			}
			env.Args = args
			return ended(run(cmd.Context(), env))
		}
	case len(c.Subcommands)+len(c.Commands) > 0:
		// Alone, it is a mistake: cobra would print the help and exit 0.
		cmd.Args = nil
		cmd.RunE = func(cmd *cobra.Command, _ []string) error {
			return fmt.Errorf("a command is required: %s", commandNames(cmd))
		}
	}
	for _, sub := range c.Subcommands {
		cmd.AddCommand(sub.build(env, helped))
	}
	for _, sub := range c.Commands {
		adopt(env, sub, c.VariablesOf, helped)
		cmd.AddCommand(sub)
	}
	return cmd
}

// adopt runs a cobra command and its own subcommands under env's log level,
// and names in their help the variables variablesOf gives.
func adopt(env Env, cmd *cobra.Command, variablesOf func(string) []settings.Variable, helped map[*cobra.Command][]settings.Variable) {
	var vars []settings.Variable
	if variablesOf != nil {
		vars = variablesOf(cmd.Name())
	}
	helped[cmd] = vars
	if run := cmd.RunE; run != nil {
		cmd.RunE = func(cmd *cobra.Command, args []string) error {
			if err := env.readLevel(); err != nil {
				return err
			}
			return run(cmd, args)
		}
	}
	if run := cmd.Run; run != nil {
		cmd.Run = nil
		cmd.RunE = func(cmd *cobra.Command, args []string) error {
			if err := env.readLevel(); err != nil {
				return err
			}
			run(cmd, args)
			return nil
		}
	}
	for _, sub := range cmd.Commands() {
		adopt(env, sub, variablesOf, helped)
	}
}

// commandNames lists cmd's visible subcommands, "a, b or c".
func commandNames(cmd *cobra.Command) string {
	var names []string
	for _, sub := range cmd.Commands() {
		if sub.IsAvailableCommand() && sub.Name() != "help" && sub.Name() != "completion" {
			names = append(names, sub.Name())
		}
	}
	if len(names) < 2 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}

// NoArgs is the Args of a command that takes no positional argument: its
// environment configures it.
func NoArgs(_ *cobra.Command, args []string) error {
	if len(args) > 0 {
		return fmt.Errorf("takes no arguments, got %q", args)
	}
	return nil
}

// ExitOK, ExitFailure and ExitUsage are the only codes a binary exits with.
const (
	ExitOK      = 0
	ExitFailure = 1 // a failure at run time: a call refused, a file unreadable, a server lost
	ExitUsage   = 2 // a mistake on the command line, or a bad setting: nothing was done
)

// Error ends a run: its exit code and the one log line that says why.
type Error struct {
	Code  int
	Msg   string
	Err   error
	Attrs []any // slog attributes beside the error, as slog.String gives them
}

func (e *Error) Error() string { return e.Msg + ": " + e.Err.Error() }

func (e *Error) Unwrap() error { return e.Err }

// BadSettingMsg is the message of the line a bad setting ends a run with;
// its error names the variable first, "LOG_LEVEL: ...".
const BadSettingMsg = "bad configuration"

// BadSetting ends a run on a bad setting, exit 2: err names the variable,
// as a settings.Reader's Err does.
func BadSetting(err error, attrs ...any) error {
	return &Error{Code: ExitUsage, Msg: BadSettingMsg, Err: err, Attrs: attrs}
}

// Failed ends a run on a failure at run time, exit 1, logged as msg.
func Failed(msg string, err error, attrs ...any) error {
	return &Error{Code: ExitFailure, Msg: msg, Err: err, Attrs: attrs}
}

// ExitCoder is an error that ends a run with its code, the run having
// already said why: in a log line, or to the person at the terminal.
type ExitCoder interface {
	error
	ExitCode() int
}

// Exit ends a run with code where the run has already said why.
func Exit(code int) error { return exitCode(code) }

type exitCode int

func (e exitCode) Error() string { return fmt.Sprintf("exit %d", int(e)) }

func (e exitCode) ExitCode() int { return int(e) }

// ended is how a Run's error ends the run: a plain one as a failure.
func ended(err error) error {
	if err == nil {
		return nil
	}
	if _, ok := errors.AsType[*Error](err); ok {
		return err
	}
	if _, ok := errors.AsType[ExitCoder](err); ok {
		return err
	}
	return Failed("failed", err)
}
