package backup

import (
	"context"
	"io"
	"log/slog"
	"strings"

	"github.com/JorisJonkers-dev/delivery/internal/settings"
)

// Method is one kind of backup: a volume's archive, a PostgreSQL dump or a
// broker's definitions. Everything that differs between them is asked of the
// method, so the Job, the Restorer and the command line never test a
// method's name, and a new method is one file and one line in methods.
type Method interface {
	// Name is the method's name in generation names and on the command line.
	Name() string
	// Summary is the method's line in the command line's help.
	Summary() string
	// Extension ends the name of the method's generations, gzip's included.
	Extension() string

	// Variables are the variables Configure reads, for the command's --help.
	Variables() []settings.Variable
	// Configure builds the method a run uses from its environment; claim is
	// the backup claim the run writes to. A variable env cannot read is left
	// in env.Err for the caller, as with every variable it reads.
	Configure(env *settings.Reader, claim string, logger *slog.Logger) (Method, error)
	// Write streams the uncompressed bytes of one generation into w: a tar
	// stream, a SQL dump or a definitions document. The Job compresses and
	// stores them.
	Write(ctx context.Context, w io.Writer) error

	// Restore reads the generation through read into the restore's work
	// folder and, once read has verified all of it, publishes it into
	// target without overwriting anything there. It sets into's Path and
	// Files and adds the checks it made.
	Restore(ctx context.Context, read ReadFunc, work, target string, into *Restored) error
	// Check is the drill's own test of a restored generation: that it would
	// load, beyond reading back whole. It adds what it checked to restored.
	Check(ctx context.Context, restored *Restored) error
	// Describe says what a restore wrote and where, for a person.
	Describe(restored Restored) (what, where string)
	// LoadHint tells the operator how to load what a restore wrote at path.
	LoadHint(path string) string
}

// ReadFunc hands the decompressed bytes of the generation being restored to
// consume, and fails unless every byte passed every check the source and
// gzip make. stage says what consume does with them, for the progress.
type ReadFunc func(stage string, consume func(plain io.Reader) error) error

// methods are the methods this package knows; a generation name with any
// other method is not ours.
var methods = []Method{Files{}, Postgres{}, RabbitMQ{}}

// Methods lists the known methods, in the order the command line offers them.
func Methods() []Method { return methods }

// MethodNamed is the known method called name, if there is one.
func MethodNamed(name string) (Method, bool) {
	for _, m := range methods {
		if m.Name() == name {
			return m, true
		}
	}
	return nil, false
}

// Extension is the file extension a method's generations carry, or "" for an
// unknown method.
func Extension(method string) string {
	if m, ok := MethodNamed(method); ok {
		return m.Extension()
	}
	return ""
}

// shellQuote makes a path safe to paste into a shell, as a load hint shows it.
func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }
