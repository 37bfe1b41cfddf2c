package settings

// Variable describes one variable a binary reads, for its --help: the
// packages that read variables keep their table beside the reads.
type Variable struct {
	Name string
	// Default is the value an unset variable stands for, or how it is
	// needed ("required", "unset").
	Default string
	Meaning string
}

// Required and Unset are the Default of a variable that must be set and of
// one that may be left out with no value standing in.
const (
	Required = "required"
	Unset    = "unset"
)
