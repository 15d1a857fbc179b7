package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/agentbox-dev/agentbox/api"
	"github.com/agentbox-dev/agentbox/client"
)

// Time travel from the command line: `agentbox steps SESSION`, `rewind SESSION STEP`, `fork
// SESSION STEP`, `pause SESSION`, `resume SESSION`, `inspect SESSION STEP` and `diff SESSION
// STEP`, each one call of the daemon's API.

// stepsClient is what the commands call; *client.Client is one, a test's fake another.
type stepsClient interface {
	Steps(ctx context.Context, id string) (*api.StepList, error)
	Rewind(ctx context.Context, id, step string) (*api.Session, error)
	Fork(ctx context.Context, id, step string) (*api.Session, error)
	Pause(ctx context.Context, id string) (*api.Session, error)
	Resume(ctx context.Context, id string) (*api.Session, error)
	InspectStepIn(ctx context.Context, id, step, codeContext string) (*api.StepInspection, error)
	DiffStepsIn(ctx context.Context, id, step, base, codeContext string) (*api.StepDiff, error)
}

// Interface guards.
var _ stepsClient = (*client.Client)(nil)

// StepsOptions are the flags and arguments of the time-travel commands.
type StepsOptions struct {
	URL, APIKey, DataDir string
	// JSON prints the API's answer as it is.
	JSON bool
	// Session and Step are the positional arguments.
	Session, Step string
	// Context is the code context whose variables inspect and diff show (a run's context); ""
	// the main one.
	Context string
	// Base is the step diff compares with; "" the step's parent.
	Base string
	Out  io.Writer
	// Client is the daemon's API; nil: a client for URL.
	Client stepsClient
}

func (o *StepsOptions) client() (stepsClient, error) {
	if o.Client != nil {
		return o.Client, nil
	}
	url := o.URL
	if url == "" {
		url = os.Getenv("AGENTBOX_URL")
	}
	if url == "" {
		url = client.DefaultURL
	}
	return client.New(url, discoverKey(RunOptions{APIKey: o.APIKey, DataDir: o.DataDir}))
}

// StepsList prints a session's steps as a tree, oldest first, its head marked.
func StepsList(ctx context.Context, o StepsOptions) error {
	c, err := o.client()
	if err != nil {
		return err
	}
	l, err := c.Steps(ctx, o.Session)
	if err != nil {
		return err
	}
	if o.JSON {
		return writeJSON(o.Out, l)
	}
	if len(l.Steps) == 0 {
		fmt.Fprintf(o.Out, "session %s has no steps yet\n", o.Session)
		return nil
	}
	depth := map[string]int{}
	tw := tabwriter.NewWriter(o.Out, 0, 4, 2, ' ', 0)
	// A session whose runs used code contexts gets a column naming each step's ("-": the main).
	contexts := slices.ContainsFunc(l.Steps, func(st api.Step) bool { return st.Context != "" })
	if contexts {
		fmt.Fprintln(tw, "STEP\tPARENT\tEXIT\tMS\tSNAPSHOT\tCONTEXT\tCODE")
	} else {
		fmt.Fprintln(tw, "STEP\tPARENT\tEXIT\tMS\tSNAPSHOT\tCODE")
	}
	for _, st := range l.Steps {
		d := 0
		if st.Parent != "" {
			d = depth[st.Parent] + 1
		}
		depth[st.ID] = d
		mark := " "
		if st.ID == l.Head {
			mark = "*"
		}
		exit := fmt.Sprint(st.ExitCode)
		if st.ErrorCode != "" {
			exit = st.ErrorCode
		} else if st.Error != nil {
			exit = st.Error.Name
		}
		snap := st.Snapshot.State
		if st.Snapshot.Bytes > 0 {
			snap += fmt.Sprintf(" %s", humanBytes(st.Snapshot.Bytes))
		}
		if contexts {
			snap += "\t" + dash(st.Context)
		}
		fmt.Fprintf(tw, "%s%s%s\t%s\t%s\t%.1f\t%s\t%s\n", mark, strings.Repeat("  ", min(d, 20)), st.ID, dash(st.Parent), exit,
			st.DurationMS, snap, firstLine(st.Code, 50))
	}
	return tw.Flush()
}

// StepsRewind rewinds a session to a step.
func StepsRewind(ctx context.Context, o StepsOptions) error {
	return sessionCall(ctx, o, func(c stepsClient) (*api.Session, error) { return c.Rewind(ctx, o.Session, o.Step) },
		func(s *api.Session) string { return fmt.Sprintf("session %s is at step %s\n", s.ID, s.Head) })
}

// StepsFork forks a session at a step and prints the new session's id.
func StepsFork(ctx context.Context, o StepsOptions) error {
	return sessionCall(ctx, o, func(c stepsClient) (*api.Session, error) { return c.Fork(ctx, o.Session, o.Step) },
		func(s *api.Session) string { return s.ID + "\n" })
}

// StepsPause pauses a session.
func StepsPause(ctx context.Context, o StepsOptions) error {
	return sessionCall(ctx, o, func(c stepsClient) (*api.Session, error) { return c.Pause(ctx, o.Session) },
		func(s *api.Session) string { return fmt.Sprintf("session %s is %s\n", s.ID, s.State) })
}

// StepsResume resumes a session.
func StepsResume(ctx context.Context, o StepsOptions) error {
	return sessionCall(ctx, o, func(c stepsClient) (*api.Session, error) { return c.Resume(ctx, o.Session) },
		func(s *api.Session) string { return fmt.Sprintf("session %s is %s\n", s.ID, s.State) })
}

// StepsInspect prints a step's variables (those of o.Context, "" the main one) and files.
func StepsInspect(ctx context.Context, o StepsOptions) error {
	c, err := o.client()
	if err != nil {
		return err
	}
	in, err := c.InspectStepIn(ctx, o.Session, o.Step, o.Context)
	if err != nil {
		return err
	}
	if o.JSON {
		return writeJSON(o.Out, in)
	}
	if in.Context != "" {
		fmt.Fprintf(o.Out, "code context %s\n", in.Context)
	}
	tw := tabwriter.NewWriter(o.Out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tTYPE\tSIZE\tVALUE")
	for _, v := range in.Variables {
		val := v.Repr
		if v.Shape != nil {
			val = fmt.Sprintf("shape %v %s", v.Shape, firstLine(v.Head, 60))
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", v.Name, v.Type, humanBytes(v.Size), firstLine(val, 80))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, f := range in.Files {
		fmt.Fprintf(o.Out, "file %s (%s)\n", f.Path, humanBytes(f.Size))
	}
	if in.Truncated {
		fmt.Fprintln(o.Out, "(more variables or files were left out)")
	}
	return nil
}

// StepsDiff prints what changed in a code context's variables (o.Context, "" the main one) and
// in the files from o.Base (default the step's parent) to the step: "+" added, "~" changed,
// "-" removed.
func StepsDiff(ctx context.Context, o StepsOptions) error {
	c, err := o.client()
	if err != nil {
		return err
	}
	d, err := c.DiffStepsIn(ctx, o.Session, o.Step, o.Base, o.Context)
	if err != nil {
		return err
	}
	if o.JSON {
		return writeJSON(o.Out, d)
	}
	head := fmt.Sprintf("from %s to %s", d.Base, d.Step)
	if o.Context != "" {
		head += ", code context " + o.Context
	}
	fmt.Fprintln(o.Out, head)
	tw := tabwriter.NewWriter(o.Out, 0, 4, 2, ' ', 0)
	for _, g := range []struct {
		sign string
		vars []api.Variable
	}{{"+", d.Added}, {"~", d.Changed}, {"-", d.Removed}} {
		for _, v := range g.vars {
			val := v.Repr
			if v.Shape != nil {
				val = fmt.Sprintf("shape %v", v.Shape)
			}
			fmt.Fprintf(tw, "%s %s\t%s\t%s\n", g.sign, v.Name, v.Type, firstLine(val, 80))
		}
	}
	for _, g := range []struct {
		sign  string
		files []api.InspectedFile
	}{{"+", d.FilesAdded}, {"~", d.FilesChanged}, {"-", d.FilesRemoved}} {
		for _, f := range g.files {
			fmt.Fprintf(tw, "%s file %s\t%s\t\n", g.sign, f.Path, humanBytes(f.Size))
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(d.Added)+len(d.Changed)+len(d.Removed)+len(d.FilesAdded)+len(d.FilesChanged)+len(d.FilesRemoved) == 0 {
		fmt.Fprintln(o.Out, "no variable or file changed")
	}
	return nil
}

func sessionCall(ctx context.Context, o StepsOptions, call func(stepsClient) (*api.Session, error), say func(*api.Session) string) error {
	c, err := o.client()
	if err != nil {
		return err
	}
	s, err := call(c)
	if err != nil {
		return err
	}
	if o.JSON {
		return writeJSON(o.Out, s)
	}
	_, err = io.WriteString(o.Out, say(s))
	return err
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func firstLine(s string, n int) string {
	s, _, _ = strings.Cut(s, "\n")
	if len(s) > n {
		s = s[:n] + "..."
	}
	return s
}

func humanBytes(n int64) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

// stepsCmd runs one of the time-travel commands.
func stepsCmd(ctx context.Context, name string, args []string, stdout, stderr io.Writer) int {
	type command struct {
		synopsis string
		args     []string
		run      func(context.Context, StepsOptions) error
	}
	cmds := map[string]command{
		"steps":   {"Usage: agentbox steps [flags] SESSION\n\nLists a session's steps (each run is one) as a tree; * marks the step the session is at.", []string{"SESSION"}, StepsList},
		"rewind":  {"Usage: agentbox rewind [flags] SESSION STEP\n\nMakes the session's variables and files those of STEP; its next run starts a branch there.", []string{"SESSION", "STEP"}, StepsRewind},
		"fork":    {"Usage: agentbox fork [flags] SESSION STEP\n\nStarts a new session from STEP and prints its id; both go on independently.", []string{"SESSION", "STEP"}, StepsFork},
		"pause":   {"Usage: agentbox pause [flags] SESSION\n\nWrites the session's state to disk and frees its sandbox; the next run or `agentbox resume` brings it back.", []string{"SESSION"}, StepsPause},
		"resume":  {"Usage: agentbox resume [flags] SESSION\n\nBrings a paused session back ahead of its next run.", []string{"SESSION"}, StepsResume},
		"inspect": {"Usage: agentbox inspect [flags] SESSION STEP\n\nPrints the variables and files STEP held, read in a throwaway copy of it: the variables of\nthe session's main code context, or of the one --context names (a run's context).", []string{"SESSION", "STEP"}, StepsInspect},
		"diff":    {"Usage: agentbox diff [flags] SESSION STEP\n\nPrints what changed from STEP's parent (or --base) to STEP: variables of the main code context\n(or of --context) and files added (+), changed (~) and removed (-).", []string{"SESSION", "STEP"}, StepsDiff},
	}
	c := cmds[name]
	opts := StepsOptions{Out: stdout}
	fs := newFlagSet(name, c.synopsis, stderr)
	fs.BoolVar(&opts.JSON, "json", false, "print the API's answer as JSON")
	fs.StringVar(&opts.URL, "url", "", "daemon `URL` (default $AGENTBOX_URL or http://127.0.0.1:8420)")
	fs.StringVar(&opts.DataDir, "data-dir", "", "data `DIR` holding the API key file (default $AGENTBOX_DATA_DIR or ~/.cache/agentbox)")
	if name == "inspect" || name == "diff" {
		fs.StringVar(&opts.Context, "context", "", "show the variables of the code context `NAME` (a run's context; default the main one)")
	}
	if name == "diff" {
		fs.StringVar(&opts.Base, "base", "", "compare with `STEP` (default the step's parent)")
	}
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return flagExit(err)
	}
	if len(pos) != len(c.args) {
		fmt.Fprintf(stderr, "agentbox %s: want %s\n", name, strings.Join(c.args, " "))
		return exitUsage
	}
	opts.Session = pos[0]
	if len(pos) > 1 {
		opts.Step = pos[1]
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if err := c.run(ctx, opts); err != nil {
		fmt.Fprintf(stderr, "agentbox %s: %v\n", name, err)
		return exitFailure
	}
	return exitOK
}
