package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/sds-proxy/sds-proxy/cmd/internal/adminclient"
	"github.com/sds-proxy/sds-proxy/cmd/internal/cli"
	"github.com/sds-proxy/sds-proxy/cmd/internal/replay"
	"github.com/sds-proxy/sds-proxy/config"
)

// replayCmd runs the requests of one or more access logs again through a
// candidate config (cmd/internal/replay) and prints, per point, what was
// degraded, what the candidate would degrade and what changed.
func replayCmd(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("replay", flag.ContinueOnError)
	fs.SetOutput(stderr)
	path := fs.String("config", "", "the candidate sds.yaml to replay the log through")
	output := fs.String("o", "text", "output: text or json (for scripts)")
	neighbours := fs.Bool("assume-neighbours", false, "give a request degraded in reality that the candidate forwards the upstream time and outcome of the last forwarded request of its point (by default its call ends at once, ok: its fate upstream is unknown either way)")
	horizon := fs.Duration("horizon", replay.DefaultHorizon, "the longest a request is taken to have lasted, for putting the log's lines in arrival order; a longer one is judged approximately (late)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	switch {
	case *path == "":
		return cli.Usagef("replay: give -config CANDIDATE.yaml, the config to replay the log through")
	case fs.NArg() == 0:
		return cli.Usagef("replay: give the access log(s) to replay, or - for stdin (such as kubectl logs POD -c sds-proxy | sds-proxy replay -config new.yaml -)")
	case *output != "text" && *output != "json":
		return cli.Usagef("replay: -o %q: want text or json", *output)
	}
	f, err := config.Load(*path, config.Options{Upstream: "http://replay.invalid"})
	if err != nil {
		fmt.Fprintln(stdout, err)
		return cli.ErrInvalid
	}
	in, closeAll, err := openLogs(fs.Args())
	if err != nil {
		return fmt.Errorf("replay: %w", err)
	}
	defer closeAll()
	rd := replay.NewReader(in, replay.ReaderOptions{Horizon: *horizon})
	began := time.Now()
	rep, err := replay.Run(f, rd.Next, replay.Options{AssumeNeighbours: *neighbours})
	if err != nil {
		return fmt.Errorf("replay: %w", err)
	}
	st := rd.Stats()
	rep.Late = st.Late
	if *output == "json" {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(struct {
			*replay.Report
			Log replay.ReaderStats `json:"log"`
		}{rep, st})
	}
	writeReplay(stdout, *path, rep, st, *neighbours, time.Since(began))
	return nil
}

// openLogs opens the logs named (- is stdin) as one stream, in order.
func openLogs(names []string) (io.Reader, func(), error) {
	var readers []io.Reader
	var files []*os.File
	closeAll := func() {
		for _, f := range files {
			f.Close()
		}
	}
	for _, name := range names {
		if name == "-" {
			readers = append(readers, os.Stdin)
			continue
		}
		f, err := os.Open(name)
		if err != nil {
			closeAll()
			return nil, nil, err
		}
		files = append(files, f)
		readers = append(readers, f, strings.NewReader("\n"))
	}
	return io.MultiReader(readers...), closeAll, nil
}

// writeReplay prints rep as a table, per point, then what the log held
// and what was approximated.
func writeReplay(w io.Writer, candidate string, rep *replay.Report, st replay.ReaderStats, neighbours bool, took time.Duration) {
	fmt.Fprintf(w, "replay of %d requests through %s (%d log lines in %s)\n\n", st.Access, candidate, st.Lines, took.Round(time.Millisecond))
	tw := tabwriter.NewWriter(w, 2, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "POINT\tREQUESTS\tDEGRADED\tWOULD DEGRADE\tNEWLY DEGRADED\tNEWLY FORWARDED\tFIRST TRIP")
	for _, p := range rep.Points {
		trip := "-"
		if p.FirstTrip != nil {
			trip = p.FirstTrip.UTC().Format("2006-01-02T15:04:05.000000Z")
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%d\t%d\t%s\n", adminclient.Cell(p.Point), p.Requests, byStrategy(p.Degraded), byStrategy(p.WouldDegrade), p.BecameDegraded, p.BecameForwarded, trip)
	}
	tw.Flush()
	fmt.Fprintf(w, "\n%d requests change: %d newly degraded, %d newly forwarded", rep.BecameDegraded+rep.BecameForwarded, rep.BecameDegraded, rep.BecameForwarded)
	if rep.Unrouted > 0 {
		fmt.Fprintf(w, "; %d match no route of the candidate (forwarded unprotected)", rep.Unrouted)
	}
	fmt.Fprintln(w)
	if rep.Unknown > 0 {
		taken := "their calls end at once, ok; -assume-neighbours gives them their point's last forwarded call's"
		if neighbours {
			taken = "their point's last forwarded call's"
		}
		fmt.Fprintf(w, "%d requests degraded in reality would be forwarded: their upstream time and outcome are unknown (taken as %s)\n", rep.Unknown, taken)
	}
	if rep.ApproximateRequests > 0 || rep.Late > 0 {
		fmt.Fprintf(w, "approximate: %d requests (%s)\n", rep.ApproximateRequests, byStrategy(rep.Approximate))
	}
	if skipped := st.Malformed + st.Older + st.Truncated + st.Long; skipped > 0 {
		fmt.Fprintf(w, "skipped: %d lines (%d malformed, %d from an older proxy without arrived, %d truncated, %d too long)\n", skipped, st.Malformed, st.Older, st.Truncated, st.Long)
		for _, p := range st.Problems {
			fmt.Fprintf(w, "  %s\n", adminclient.Cell(p.String()))
		}
	}
}

// byStrategy writes counts by name, largest first: "visit 12, timeout 3";
// "-" for none.
func byStrategy(m map[string]int) string {
	if len(m) == 0 {
		return "-"
	}
	names := slices.SortedFunc(maps.Keys(m), func(a, b string) int {
		if m[a] != m[b] {
			return m[b] - m[a]
		}
		return strings.Compare(a, b)
	})
	parts := make([]string, len(names))
	for i, n := range names {
		parts[i] = fmt.Sprintf("%s %d", n, m[n])
	}
	return strings.Join(parts, ", ")
}
