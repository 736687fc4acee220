package adminclient

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/sds-proxy/sds-proxy/cmd/internal/cli"
	"github.com/sds-proxy/sds-proxy/config"
	"github.com/sds-proxy/sds-proxy/proxy/admin"
)

// Status is `sds-proxy status`: it prints the state of a running proxy's
// points, read from its admin port's GET /status, as a table (-o table,
// the default) or as the document itself (-o json, indented). fs is the
// command's flag set, which main made: a wrong command line's problems
// and the usage go to its output. Status returns
// cli.ErrUsage for a wrong command line, and an error naming the address
// and the cause when the admin port cannot be reached, answers other than
// 200, or answers something that is not a /status document.
func Status(ctx context.Context, fs *flag.FlagSet, args []string, stdout io.Writer) error {
	flags, err := parseStatusFlags(fs, args)
	if err != nil || flags.base == "" {
		return err // -h asked for the usage: base is unset
	}
	body, _, err := Get(ctx, flags.base, "/status", flags.timeout)
	if err != nil {
		return err
	}
	var doc admin.Status
	if err := decodeStatus(body, &doc); err != nil {
		return fmt.Errorf("admin port at %s: GET /status: %w", flags.base, err)
	}
	if flags.json {
		var out bytes.Buffer
		if err := json.Indent(&out, body, "", "  "); err != nil {
			return fmt.Errorf("admin port at %s: GET /status: %w", flags.base, err)
		}
		out.WriteByte('\n')
		_, err := stdout.Write(out.Bytes())
		return err
	}
	return writeStatusTable(stdout, &doc)
}

// statusFlags are status's command line.
type statusFlags struct {
	base    string        // the admin port's base URL (URL)
	json    bool          // -o json
	timeout time.Duration // positive
}

// parseStatusFlags parses status's command line with fs. A wrong one is
// cli.ErrUsage, after the reason and the usage went to fs.Output(); -h
// prints the usage and returns zero flags and no error. The admin port is
// -admin when given,
// else the admin address of the -config file (configAdmin), else
// DefaultAdmin; a -config file that does not say is an error (exit 1).
func parseStatusFlags(fs *flag.FlagSet, args []string) (statusFlags, error) {
	addr := fs.String("admin", DefaultAdmin, "admin port: host:port or http://host:port (wins over -config)")
	configPath := fs.String("config", "", "the proxy's config file: its admin address is the admin port (wildcard hosts as 127.0.0.1)")
	output := fs.String("o", "table", "output: table or json")
	timeout := fs.Duration("timeout", 5*time.Second, "give up on the admin port after this long")
	if err := cli.Parse(fs, args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return statusFlags{}, nil
		}
		return statusFlags{}, err
	}
	adminGiven := false
	fs.Visit(func(f *flag.Flag) { adminGiven = adminGiven || f.Name == "admin" })
	if *configPath != "" && !adminGiven {
		a, err := configAdmin(*configPath)
		if err != nil {
			return statusFlags{}, err
		}
		*addr = a
	}
	base, problem := URL(*addr)
	switch {
	case fs.NArg() > 0:
		problem = fmt.Errorf("unexpected arguments %q", fs.Args())
	case *output != "table" && *output != "json":
		problem = fmt.Errorf("-o %q: want table or json", *output)
	case *timeout <= 0:
		problem = fmt.Errorf("-timeout %v: want a positive duration", *timeout)
	}
	if problem != nil {
		fmt.Fprintln(fs.Output(), "sds-proxy status:", problem)
		fs.Usage()
		return statusFlags{}, cli.ErrUsage
	}
	return statusFlags{base: base, json: *output == "json", timeout: *timeout}, nil
}

// maxStatusConfig bounds what status reads of a -config file, in bytes:
// config.ParseText refuses a file over 1 MiB, and the bound keeps a wrong
// path (a device, a log) from being read whole.
const maxStatusConfig = 4 << 20

// configAdmin returns the admin address of the config file at path, as
// the proxy would listen on it, with a wildcard host (0.0.0.0, ::, none)
// made 127.0.0.1: the address status reaches from beside the proxy. The
// file is parsed by config.ParseText, which reads none of the files it
// names; its upstream is not asked for, as run may take it from
// -upstream. A file that does not parse, or whose admin port is 0 (a free
// port chosen at start, which the file cannot tell), is an error that
// says to give -admin.
func configAdmin(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("-config: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxStatusConfig))
	if err != nil {
		return "", fmt.Errorf("-config: %w", err)
	}
	// A stand-in upstream: the file's own, or its absence, is not status's concern.
	file, err := config.ParseText(path, data, config.Options{Upstream: "http://127.0.0.1:1"})
	if err != nil {
		return "", fmt.Errorf("-config %s does not parse, so its admin address is unknown; give -admin ADDR:\n%w", path, err)
	}
	if _, port, err := net.SplitHostPort(file.Admin); err != nil || port == "0" {
		return "", fmt.Errorf("-config %s: admin %q has no fixed port to reach; give -admin ADDR", path, file.Admin)
	}
	return cli.Loopback(file.Admin), nil
}

// decodeStatus reads a /status document into doc: it must be one JSON
// object with "now" and "points".
func decodeStatus(body []byte, doc *admin.Status) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(doc); err != nil {
		return fmt.Errorf("the answer is not a /status document: %w", err)
	}
	if dec.More() {
		return errors.New("the answer is not a /status document: more than one JSON value")
	}
	if doc.Points == nil || doc.Now.IsZero() {
		return errors.New(`the answer is not a /status document: no "now" or no "points"`)
	}
	return nil
}

// writeStatusTable writes doc as a header line and a table of one row per
// point, in config order, ages and times counted from doc.Now; "-" marks
// what the document does not hold. Under the table, each point's queue,
// per-key rules and stale: have a line each.
func writeStatusTable(w io.Writer, doc *admin.Status) error {
	var b bytes.Buffer
	b.WriteString(statusHeader(doc))
	if line := clusterLine(doc); line != "" {
		b.WriteString("\n" + line)
	}
	if line := staleCacheLine(doc); line != "" {
		b.WriteString("\n" + line)
	}
	b.WriteString("\n\n")
	tw := tabwriter.NewWriter(&b, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "POINT\tMODE\tSTATE\tREASON\tRPS\tERR%\tP50\tP99\tINFLIGHT\tLAST TRIP")
	for i := range doc.Points {
		p := &doc.Points[i]
		rps, errPercent, p50, p99 := "-", "-", "-", "-"
		if t := p.Traffic; t != nil {
			rps = strconv.FormatFloat(t.RequestsPerSecond, 'f', 1, 64)
			if t.ErrorPercent != nil {
				errPercent = strconv.FormatFloat(*t.ErrorPercent, 'f', 1, 64)
			}
			p50, p99 = latency(t.P50), latency(t.P99)
		}
		lastTrip := "-"
		if t := p.LastTrip; t != nil {
			lastTrip = fmt.Sprintf("%s %d/%d %s ago", t.Strategy, t.Count, t.Threshold, age(doc.Now, t.At))
			lastTrip += tripCount(doc.Now, p)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t%s\n", Cell(p.Name), Cell(p.Mode), state(p), reason(doc.Now, p),
			rps, errPercent, p50, p99, p.Window.InFlight, lastTrip)
	}
	if len(doc.Points) == 0 {
		fmt.Fprintln(tw, "(no points)")
	}
	tw.Flush()
	sep := "\n" // a blank line between the table and the lines of queues, per-key rules and stale:
	for i := range doc.Points {
		p := &doc.Points[i]
		lines := keyLines(p)
		if line := queueLine(p); line != "" {
			lines = append([]string{line}, lines...)
		}
		if line := staleLine(p); line != "" {
			lines = append(lines, line)
		}
		for _, line := range lines {
			b.WriteString(sep + line + "\n")
			sep = ""
		}
	}
	_, err := w.Write(b.Bytes())
	return err
}

// queueLine is the line under the table about p's queue at its limit,
// or "" for a point without one: "queue P: N waiting[, standing];
// target T, maxWait W, interval I, maxLength L".
func queueLine(p *admin.PointStatus) string {
	q := p.Queue
	if q == nil {
		return ""
	}
	standing := ""
	if q.Standing {
		standing = ", standing"
	}
	return fmt.Sprintf("queue %s: %d waiting%s; target %s, maxWait %s, interval %s, maxLength %d",
		Cell(p.Name), q.Length, standing, Cell(q.Target), Cell(q.MaxWait), Cell(q.Interval), q.MaxLength)
}

// staleLine is the line under the table about p's stale: setting, or ""
// for a point without one: "stale P: degraded GET and HEAD get the last
// good answer, at most MAXAGE old".
func staleLine(p *admin.PointStatus) string {
	if p.Stale == nil {
		return ""
	}
	return fmt.Sprintf("stale %s: degraded GET and HEAD get the last good answer, at most %s old", Cell(p.Name), Cell(p.Stale.MaxAge))
}

// keyLines are the lines under the table about p's per-key rules, one
// per rule in judging order, none for a point without: "perKey P KEY:
// T/M tracked; heaviest L1 (V visits, F in flight), L2 (V visits)...",
// calls in flight said when there are any, or "; no key with visits in
// the window". Keys are shown by label, as /status has them.
func keyLines(p *admin.PointStatus) []string {
	var lines []string
	for _, r := range p.PerKey {
		var b strings.Builder
		fmt.Fprintf(&b, "perKey %s %s: %d/%d tracked", Cell(p.Name), Cell(r.Key), r.Tracked, r.MaxKeys)
		if len(r.Heaviest) == 0 {
			b.WriteString("; no key with visits in the window")
		}
		for i, k := range r.Heaviest {
			if i == 0 {
				b.WriteString("; heaviest ")
			} else {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, "%s (%d visits", Cell(k.Label), k.Visits)
			if k.InFlight > 0 {
				fmt.Fprintf(&b, ", %d in flight", k.InFlight)
			}
			b.WriteString(")")
		}
		lines = append(lines, b.String())
	}
	return lines
}

// tripCount is what the LAST TRIP cell adds when p's event history holds
// more than one trip, repeats included: ", N trips in D", D from the first
// of them to now; "" otherwise.
func tripCount(now time.Time, p *admin.PointStatus) string {
	n, first := 0, now
	for _, e := range p.Events {
		if e.Kind != "trip" {
			continue
		}
		n += 1 + e.Repeats
		if e.At.Before(first) {
			first = e.At
		}
	}
	if n < 2 {
		return ""
	}
	return fmt.Sprintf(", %d trips in %s", n, age(now, first))
}

// statusHeader is the line above the table: the config in force and the
// last reload.
func statusHeader(doc *admin.Status) string {
	c := &doc.Config
	var b strings.Builder
	if c.Path == "" {
		b.WriteString("config: none (run from -upstream alone)")
	} else {
		hash := c.Hash
		if len(hash) > 12 {
			hash = hash[:12]
		}
		fmt.Fprintf(&b, "config: %s (sha256 %s)", Cell(c.Path), hash)
		if !c.LoadedAt.IsZero() {
			fmt.Fprintf(&b, " loaded %s ago", age(doc.Now, c.LoadedAt))
		}
	}
	switch r := c.LastReload; {
	case r == nil:
	case r.OK && r.Change != "":
		fmt.Fprintf(&b, "; last reload ok %s ago: %s", age(doc.Now, r.At), Cell(r.Change))
	case r.OK:
		fmt.Fprintf(&b, "; last reload ok %s ago", age(doc.Now, r.At))
	default:
		line, _, _ := strings.Cut(r.Error, "\n")
		fmt.Fprintf(&b, "; last reload REJECTED %s ago: %s", age(doc.Now, r.At), Cell(line))
	}
	return b.String()
}

// clusterLine is the line about the shared buckets' Redis under the
// header, or "" without cluster:.
func clusterLine(doc *admin.Status) string {
	c := doc.Cluster
	switch {
	case c == nil:
		return ""
	case c.Up:
		return fmt.Sprintf("redis: up for %s: the points share their clusterTokenBucket", age(doc.Now, c.Since))
	case c.Since.IsZero():
		return fmt.Sprintf("redis: no answer yet: each point counts on its share (tokensPerSecond / %d)", c.Replicas)
	}
	line, _, _ := strings.Cut(c.LastError, "\n")
	return fmt.Sprintf("redis: DOWN for %s: each point counts on its share (tokensPerSecond / %d): %s", age(doc.Now, c.Since), c.Replicas, Cell(line))
}

// staleCacheLine is the line about the stale cache under the header, or ""
// without one: "stale cache: 1.2MiB of 64MiB, 37 answers", or "stale
// cache: off (maxBytes 0)".
func staleCacheLine(doc *admin.Status) string {
	c := doc.StaleCache
	switch {
	case c == nil:
		return ""
	case c.MaxBytes <= 0:
		return "stale cache: off (maxBytes 0): no answer is kept"
	}
	answers := "answers"
	if c.Entries == 1 {
		answers = "answer"
	}
	return fmt.Sprintf("stale cache: %s of %s, %d %s", size(c.Bytes), size(c.MaxBytes), c.Entries, answers)
}

// size formats a number of bytes in the largest binary unit it reaches,
// to a tenth below 100 of it: "900B", "1.2MiB", "64MiB", "512KiB".
func size(n int64) string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB"}
	v, i := float64(max(n, 0)), 0
	for v >= 1024 && i < len(units)-1 {
		v /= 1024
		i++
	}
	s := strconv.FormatFloat(v, 'f', 1, 64)
	if i == 0 || v >= 100 {
		s = strconv.FormatFloat(v, 'f', 0, 64)
	}
	return strings.TrimSuffix(s, ".0") + units[i]
}

// reason is the REASON cell: inside a delay, its strategy, end and next
// probe; else the strategy that would trip with its count against its
// threshold; else "-".
func reason(now time.Time, p *admin.PointStatus) string {
	if f := p.Forced; f != nil {
		return fmt.Sprintf("switch ends in %s: %s (then %s)", until(now, f.Until), short(Cell(f.Reason), 60), limiterReason(now, p))
	}
	return limiterReason(now, p)
}

// state is the STATE cell: "forced:ACTION" under an operator's switch,
// else the point's state.
func state(p *admin.PointStatus) string {
	if f := p.Forced; f != nil {
		return "forced:" + Cell(f.Action)
	}
	return Cell(p.State)
}

// short cuts s to at most n characters, marking the cut with "...".
func short(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n-3]) + "..."
	}
	return s
}

// limiterReason is reason without a switch: what the point's limiter says.
func limiterReason(now time.Time, p *admin.PointStatus) string {
	if d := p.Delay; d != nil {
		s := fmt.Sprintf("%s delay, ends in %s", Cell(d.Strategy), until(now, d.Until))
		switch {
		case d.Probing:
			s += ", probing"
		case !d.NextProbe.IsZero():
			s += ", probe in " + until(now, d.NextProbe)
		}
		return s
	}
	if r := p.Reason; r != nil {
		return fmt.Sprintf("%s %d/%d", Cell(r.Strategy), r.Count, r.Threshold)
	}
	if p.Forced != nil {
		return Cell(p.State)
	}
	if r := p.Recovery; r != nil {
		return fmt.Sprintf("admits %d%%, all in %s", int(r.Share*100), until(now, r.Until))
	}
	if a := p.Adaptive; a != nil {
		if a.Measuring {
			return fmt.Sprintf("adaptive limit %d (measuring)", a.Limit)
		}
		return fmt.Sprintf("adaptive limit %d", a.Limit)
	}
	return "-"
}

// age is how long before now t was, to the second ("3m12s"); "0s" for a
// t after now (clocks apart).
func age(now, t time.Time) string {
	return max(now.Sub(t), 0).Round(time.Second).String()
}

// until is how long after now t is, to the tenth of a second below 10s
// ("2.5s") and to the second above ("28s"); "0s" once t has passed.
func until(now, t time.Time) string {
	d := max(t.Sub(now), 0)
	if d < 10*time.Second {
		return d.Round(100 * time.Millisecond).String()
	}
	return d.Round(time.Second).String()
}

// latency formats a latency in seconds for the table: "850µs", "12.3ms",
// "1.25s"; "-" for none.
func latency(seconds *float64) string {
	if seconds == nil {
		return "-"
	}
	d := time.Duration(*seconds * float64(time.Second))
	switch {
	case d < time.Millisecond:
		return strconv.FormatInt(d.Microseconds(), 10) + "µs"
	case d < time.Second:
		return strconv.FormatFloat(*seconds*1000, 'f', 1, 64) + "ms"
	}
	return strconv.FormatFloat(*seconds, 'f', 2, 64) + "s"
}
