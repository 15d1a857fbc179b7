package bench

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"reflect"
	"sort"
	"strings"
)

// subcommands are the benchmarks `agentbox bench` knows.
var subcommands = map[string]func(ctx context.Context, args []string, out io.Writer) error{
	"nano":     mainNano,
	"heavy":    mainHeavy,
	"egress":   mainEgress,
	"mcp":      mainMCP,
	"steps":    mainSteps,
	"stream":   mainStream,
	"packages": mainPackages,
	"e2b":      mainE2B,
	"cluster":  mainCluster,
}

// Main runs `agentbox bench SUBCOMMAND [flags]`, writing the report to out and progress to stderr.
func Main(ctx context.Context, args []string, out io.Writer) error {
	names := make([]string, 0, len(subcommands))
	for n := range subcommands {
		names = append(names, n)
	}
	sort.Strings(names)
	if len(args) == 0 || args[0] == "-h" || args[0] == "-help" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprintf(out, "usage: agentbox bench SUBCOMMAND [flags]\n\nsubcommands: %s\nrun `agentbox bench NAME -h` for a benchmark's flags\n", strings.Join(names, ", "))
		if len(args) == 0 {
			return errors.New("bench: name a benchmark: " + strings.Join(names, ", "))
		}
		return nil
	}
	run, ok := subcommands[args[0]]
	if !ok {
		return fmt.Errorf("bench: unknown benchmark %q: the benchmarks are %s", args[0], strings.Join(names, ", "))
	}
	return run(ctx, args[1:], out)
}

// newFlagSet is the flag set of `agentbox bench NAME`: -h prints usage, the benchmark's
// description ending in "flags:", then the flags; errors go to out as well.
func newFlagSet(name, usage string, out io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("agentbox bench "+name, flag.ContinueOnError)
	fs.SetOutput(out)
	fs.Usage = func() {
		fmt.Fprint(out, usage)
		fs.PrintDefaults()
	}
	return fs
}

// parseFlags parses args into fs. help is true when they asked for -h, which is not an error: the
// usage has been printed and the benchmark does not run.
func parseFlags(fs *flag.FlagSet, args []string) (help bool, err error) {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return true, nil
		}
		return false, err
	}
	return false, nil
}

// fillDefaults sets every field of *o that is unset, a number ≤ 0, an empty string or a nil
// interface (a writer), to the same field of d. The Run functions apply a benchmark's defaults
// with it and its flags show the same value as theirs, so each default is written once.
func fillDefaults[T any](o *T, d T) {
	v, dv := reflect.ValueOf(o).Elem(), reflect.ValueOf(d)
	for i := range v.NumField() {
		f := v.Field(i)
		unset := false
		switch f.Kind() {
		case reflect.Int, reflect.Int64:
			unset = f.Int() <= 0
		case reflect.String:
			unset = f.String() == ""
		case reflect.Interface:
			unset = f.IsNil()
		}
		if unset {
			f.Set(dv.Field(i))
		}
	}
}
