package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

const usage = `Usage: githubopenapi -operations FILE [-in FILE] [-out FILE]

githubopenapi cuts GitHub's REST API description (generated/api.github.com.json
of the npm package @octokit/openapi) down to the operations named in the
operations file (one operationId a line, # comments), with every component
they reach through $ref. The same document and list give the same bytes, so
third_party/github/ is cut anew from the next version by running it again:

  githubopenapi -in package/generated/api.github.com.json \
    -operations third_party/github/operations.txt \
    -out third_party/github/api.github.com.json

Flags:
`

// run cuts the document as its flags say; it exits 2 on a wrong command
// line and 1 when the cut fails.
func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	flags := flag.NewFlagSet("githubopenapi", flag.ContinueOnError)
	// The flag package writes its complaint and the usage while parsing;
	// they are held until it is known whether they belong on stdout (--help).
	var parsing bytes.Buffer
	flags.SetOutput(&parsing)
	in := flags.String("in", "-", "the full document; - reads standard input")
	ops := flags.String("operations", "", "the file listing the operation ids to keep")
	out := flags.String("out", "-", "where the cut is written; - is standard output")
	flags.Usage = func() {
		fmt.Fprint(flags.Output(), usage)
		flags.PrintDefaults()
	}
	if err := flags.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			_, _ = stdout.Write(parsing.Bytes())
			return 0
		}
		_, _ = stderr.Write(parsing.Bytes())
		return 2
	}
	if *ops == "" || flags.NArg() > 0 {
		fmt.Fprintln(stderr, "githubopenapi: -operations is required and nothing else may follow the flags")
		flags.SetOutput(stderr)
		flags.Usage()
		return 2
	}
	if err := cut(*in, *ops, *out, stdin, stdout); err != nil {
		fmt.Fprintln(stderr, "githubopenapi:", err)
		return 1
	}
	return 0
}

func cut(in, ops, out string, stdin io.Reader, stdout io.Writer) error {
	list, err := os.ReadFile(ops) //nolint:gosec // the file the command line names is the one to read
	if err != nil {
		return err
	}
	var full []byte
	if in == "-" {
		full, err = io.ReadAll(stdin)
	} else {
		full, err = os.ReadFile(in) //nolint:gosec // as above
	}
	if err != nil {
		return err
	}
	subset, err := Cut(full, ParseOperations(string(list)))
	if err != nil {
		return fmt.Errorf("%s: %w", in, err)
	}
	if out == "-" {
		_, err = stdout.Write(subset)
		return err
	}
	return os.WriteFile(out, subset, 0o644) //nolint:gosec // a vendored document, read by all
}
