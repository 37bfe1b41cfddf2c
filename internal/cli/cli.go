package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/JorisJonkers-dev/delivery/internal/settings"
)

// Service is a binary its environment configures, as its --help tells it.
type Service struct {
	Name    string
	Summary string // what it does, in a sentence or two
	// Variables are the variables it reads, in the order its help lists them.
	Variables []settings.Variable
}

// Answer reads a service's arguments before it reads its environment. A
// service takes none but --help (-h) and --version: those print on stdout
// and answer 0; anything else prints the mistake and the usage on stderr and
// answers 2. Without arguments answered is false, and the service starts.
func (s Service) Answer(args []string, stdout, stderr io.Writer) (code int, answered bool) {
	if len(args) == 0 {
		return 0, false
	}
	flags := flag.NewFlagSet(s.Name, flag.ContinueOnError)
	flags.SetOutput(io.Discard)
	version := flags.Bool("version", false, "print the version and exit")
	err := flags.Parse(args)
	switch {
	case errors.Is(err, flag.ErrHelp):
		s.Help(stdout)
		return 0, true
	case err != nil:
		// an unknown flag: printed below
	case flags.NArg() > 0:
		err = fmt.Errorf("unexpected argument %q", flags.Arg(0))
	case *version:
		fmt.Fprintln(stdout, VersionLine(s.Name))
		return 0, true
	default: // --version=false
		return 0, false
	}
	fmt.Fprintf(stderr, "%s: %v\n\n", s.Name, err)
	s.usage(stderr)
	return 2, true
}

// Help is what --help prints: the summary, the usage and the variables.
func (s Service) Help(w io.Writer) {
	fmt.Fprintf(w, "%s\n\n", s.Summary)
	s.usage(w)
	fmt.Fprintln(w, "\nEnvironment:")
	WriteVariables(w, s.Variables)
}

func (s Service) usage(w io.Writer) {
	fmt.Fprintf(w, "Usage:\n  %s [--help | --version]\n\n", s.Name)
	fmt.Fprintln(w, "Its environment configures it; it takes no other arguments.")
	fmt.Fprintln(w, "\nFlags:")
	fmt.Fprintln(w, "  -h, --help   print this help and exit")
	fmt.Fprintln(w, "  --version    print the version and exit")
}

// WriteVariables writes vars as an aligned table, one variable a line.
func WriteVariables(w io.Writer, vars []settings.Variable) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, v := range vars {
		def := v.Default
		if def == "" {
			def = settings.Unset
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\n", v.Name, def, v.Meaning)
	}
	_ = tw.Flush()
}
